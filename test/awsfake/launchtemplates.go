package awsfake

import (
	"net/url"
	"sort"
	"strconv"
	"time"
)

// xmlLaunchTemplate is a launch template as DescribeLaunchTemplates and
// ModifyLaunchTemplate render it.
type xmlLaunchTemplate struct {
	LaunchTemplateID     string `xml:"launchTemplateId"`
	LaunchTemplateName   string `xml:"launchTemplateName"`
	CreateTime           string `xml:"createTime"`
	CreatedBy            string `xml:"createdBy"`
	DefaultVersionNumber int64  `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64  `xml:"latestVersionNumber"`
}

func renderLaunchTemplate(lt *LaunchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{
		LaunchTemplateID:     lt.ID,
		LaunchTemplateName:   lt.Name,
		CreateTime:           time.Unix(0, 0).UTC().Format(asgTimeFormat),
		CreatedBy:            "arn:aws:iam::" + accountID + ":root",
		DefaultVersionNumber: defaultVersion(lt),
		LatestVersionNumber:  latestVersion(lt),
	}
}

// describeLaunchTemplates answers DescribeLaunchTemplates: the templates
// named by LaunchTemplateId.N and LaunchTemplateName.N (any that does not
// exist fails the call), or all of them; by ID, MaxResults (1-200) a page.
func (s *Server) describeLaunchTemplates(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	limit, aerr := intParam(form, "MaxResults", 200, 1, 200, func(f string, a ...any) *apiError {
		return ec2Error("InvalidParameterValue", f, a...)
	})
	if aerr != nil {
		return nil, aerr
	}
	ids, names := listParam(form, "LaunchTemplateId"), listParam(form, "LaunchTemplateName")
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, id := range ids {
		if s.templates[id] == nil {
			return nil, ec2Error("InvalidLaunchTemplateId.NotFound",
				"At least one of the launch templates specified in the request does not exist.")
		}
		set[id] = true
	}
	for _, n := range names {
		lt := s.findTemplate("", n)
		if lt == nil {
			return nil, ec2Error("InvalidLaunchTemplateName.NotFoundException",
				"At least one of the launch templates specified in the request does not exist.")
		}
		set[lt.ID] = true
	}
	if len(ids) == 0 && len(names) == 0 {
		for id := range s.templates {
			set[id] = true
		}
	}
	keys := make([]string, 0, len(set))
	for id := range set {
		keys = append(keys, id)
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidPaginationToken")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		LaunchTemplates []xmlLaunchTemplate `xml:"launchTemplates>item"`
		NextToken       string              `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, id := range page {
		out.LaunchTemplates = append(out.LaunchTemplates, renderLaunchTemplate(s.templates[id]))
	}
	return out, nil
}

// namedTemplate finds the template LaunchTemplateId or LaunchTemplateName
// (exactly one of them) names.
func (s *Server) namedTemplate(form url.Values) (*LaunchTemplate, *apiError) {
	id, name := form.Get("LaunchTemplateId"), form.Get("LaunchTemplateName")
	switch {
	case id != "" && name != "":
		return nil, ec2Error("InvalidParameterCombination", "Specify either a launch template ID or a launch template name, but not both.")
	case id == "" && name == "":
		return nil, ec2Error("MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId")
	}
	lt := s.findTemplate(id, name)
	switch {
	case lt == nil && id != "":
		return nil, ec2Error("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case lt == nil:
		return nil, ec2Error("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
	}
	return lt, nil
}

// createLaunchTemplateVersion answers CreateLaunchTemplateVersion: a new
// version numbered after the latest, with SourceVersion's data (if given)
// overridden by LaunchTemplateData.InstanceType and .ImageId. The default
// version stays.
func (s *Server) createLaunchTemplateVersion(form url.Values) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, aerr := s.namedTemplate(form)
	if aerr != nil {
		return nil, aerr
	}
	var v LaunchTemplateVersion
	if src := form.Get("SourceVersion"); src != "" {
		from, ok := resolveVersion(lt, src)
		if !ok {
			return nil, ec2Error("InvalidLaunchTemplateId.VersionNotFound",
				"Could not find launch template version %s for launch template ID %s.", src, lt.ID)
		}
		v = from
	}
	if t := form.Get("LaunchTemplateData.InstanceType"); t != "" {
		v.InstanceType = t
	}
	if im := form.Get("LaunchTemplateData.ImageId"); im != "" {
		v.ImageID = im
	}
	v.Number = latestVersion(lt) + 1
	lt.Versions = append(lt.Versions, v)
	x := xmlLaunchTemplateVersion{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, VersionNumber: v.Number,
		CreateTime: time.Unix(0, 0).UTC().Format(asgTimeFormat), DefaultVersion: v.Number == defaultVersion(lt)}
	x.LaunchTemplateData.InstanceType = v.InstanceType
	x.LaunchTemplateData.ImageID = "ami-00000000000000000"
	if v.ImageID != "" {
		x.LaunchTemplateData.ImageID = v.ImageID
	}
	return struct {
		Version xmlLaunchTemplateVersion `xml:"launchTemplateVersion"`
	}{x}, nil
}

// modifyLaunchTemplate answers ModifyLaunchTemplate: SetDefaultVersion (a
// version number that exists) becomes the default version.
func (s *Server) modifyLaunchTemplate(form url.Values) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lt, aerr := s.namedTemplate(form)
	if aerr != nil {
		return nil, aerr
	}
	if raw := form.Get("SetDefaultVersion"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if _, ok := resolveVersion(lt, raw); err != nil || !ok {
			return nil, ec2Error("InvalidLaunchTemplateId.VersionNotFound",
				"Could not find launch template version %s for launch template ID %s.", raw, lt.ID)
		}
		lt.DefaultVersion = n
	}
	return struct {
		LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
	}{renderLaunchTemplate(lt)}, nil
}

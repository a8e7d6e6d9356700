package budget

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// Nodes is how many nodes a budget lets go at once: a count, or a
// percentage of the node group's nodes.
type Nodes struct {
	Value   int
	Percent bool
}

// Of returns the number of nodes n allows in a group of groupNodes nodes.
// A percentage rounds up (10% of 11 nodes is 2), as Karpenter's budgets
// do, so that a non-zero percentage of a non-empty group lets at least one
// node go.
func (n Nodes) Of(groupNodes int) int {
	if !n.Percent {
		return n.Value
	}
	if groupNodes <= 0 {
		return 0
	}
	return (n.Value*groupNodes + 99) / 100
}

func (n Nodes) String() string {
	if n.Percent {
		return strconv.Itoa(n.Value) + "%"
	}
	return strconv.Itoa(n.Value)
}

// Budget is one disruption budget: at most Nodes of a matching group's
// nodes may be disrupted at once for a matching reason, while the budget
// is active.
type Budget struct {
	Nodes Nodes
	// Reasons the budget applies to; empty means every voluntary reason
	// but scale-down's (see Voluntary, disruption.DeleteOnly). Unhealthy,
	// Interrupted, Empty and Underutilized are held by a budget only when
	// it names them.
	Reasons []disruption.Reason
	// NodeGroups matches the ids of the groups the budget applies to
	// (unanchored, as regexp.MatchString: write ^ and $ for a whole id);
	// nil means every group.
	NodeGroups *regexp.Regexp
	// Schedule, when not nil, makes the budget active only for Duration
	// from each of its times (UTC); nil means always active.
	Schedule     cron.Schedule
	ScheduleSpec string
	Duration     time.Duration
}

// Voluntary reports whether r is a voluntary reason: one the autoscaler
// chooses (empty, underutilized, consolidatable, drifted, expired), as
// opposed to a node that fails (unhealthy) or that the provider takes back
// (interrupted) or whose reserved capacity ends (reservationending). The
// default budget, and a budget without reasons, apply to voluntary reasons
// only.
func Voluntary(r disruption.Reason) bool {
	return r != disruption.Unhealthy && r != disruption.Interrupted && r != disruption.ReservationEnding
}

// Matches reports whether b applies to reason in group.
func (b Budget) Matches(group string, reason disruption.Reason) bool {
	if b.NodeGroups != nil && !b.NodeGroups.MatchString(group) {
		return false
	}
	if len(b.Reasons) == 0 {
		return Voluntary(reason) && !disruption.DeleteOnly(reason)
	}
	for _, r := range b.Reasons {
		if r == reason {
			return true
		}
	}
	return false
}

// Active reports whether b holds at now: always without a schedule, else
// when one of the schedule's times t has t <= now < t+Duration.
func (b Budget) Active(now time.Time) bool {
	if b.Schedule == nil {
		return true
	}
	// Next is the first time strictly after its argument: a time in
	// (now-Duration, now] starts a window that now is in.
	t := b.Schedule.Next(now.UTC().Add(-b.Duration))
	return !t.IsZero() && !t.After(now)
}

// Window returns the active window now is in: from the latest schedule
// time at or before now, to the end of its window or of the later windows
// that overlap or touch it (a schedule that fires again before its window
// ends extends it). ok is false when b is not active at now or has no schedule.
// It serves the explainer ("held until 17:00").
func (b Budget) Window(now time.Time) (start, end time.Time, ok bool) {
	if b.Schedule == nil || !b.Active(now) {
		return time.Time{}, time.Time{}, false
	}
	const maxSteps = 10000 // "* * * * *" for a day is 1440 steps
	now = now.UTC()
	start = b.Schedule.Next(now.Add(-b.Duration))
	for i := 0; i < maxSteps; i++ {
		n := b.Schedule.Next(start)
		if n.IsZero() || n.After(now) {
			break
		}
		start = n
	}
	end = start.Add(b.Duration)
	for i := 0; i < maxSteps; i++ {
		n := b.Schedule.Next(end.Add(-b.Duration))
		if n.IsZero() || n.After(end) {
			break
		}
		end = n.Add(b.Duration)
	}
	return start, end, true
}

// String returns b in the flag syntax Parse reads.
func (b Budget) String() string {
	parts := []string{"nodes=" + b.Nodes.String()}
	if len(b.Reasons) > 0 {
		rs := make([]string, len(b.Reasons))
		for i, r := range b.Reasons {
			rs[i] = string(r)
		}
		parts = append(parts, "reasons="+strings.Join(rs, ","))
	}
	if b.NodeGroups != nil {
		parts = append(parts, "node-groups="+b.NodeGroups.String())
	}
	if b.Schedule != nil {
		parts = append(parts, "schedule="+b.ScheduleSpec, "duration="+b.Duration.String())
	}
	return strings.Join(parts, ";")
}

// The keys of the flag syntax.
const (
	keyNodes      = "nodes"
	keyReasons    = "reasons"
	keyNodeGroups = "node-groups"
	keySchedule   = "schedule"
	keyDuration   = "duration"
)

// Parse reads one budget from a flag value: key=value fields separated by
// ';', e.g.
//
//	nodes=10%;reasons=drifted,expired;node-groups=^spot-;schedule=0 9 * * 1-5;duration=8h
//
// nodes (required) is a count ("3") or a whole percentage ("10%", 0 to
// 100) of the group's nodes; reasons is a comma-separated list of
// disruption reasons (case-insensitive; empty or absent: every voluntary
// reason); node-groups is a regular expression on node group ids (absent:
// every group); schedule is a cron expression of five fields (minute, hour,
// day of month, month, day of week, in UTC) or @yearly, @annually,
// @monthly, @weekly, @daily, @midnight or @hourly; duration (a Go
// duration, "8h", "90m") is required with a schedule and allowed only with
// one. No value may contain ';'.
func Parse(value string) (Budget, error) {
	b, err := parse(value)
	if err != nil {
		return Budget{}, fmt.Errorf("disruption budget %q: %w", value, err)
	}
	return b, nil
}

func parse(value string) (Budget, error) {
	var b Budget
	seen := map[string]string{}
	for _, field := range strings.Split(value, ";") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		key, val, ok := strings.Cut(field, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok {
			return Budget{}, fmt.Errorf("field %q: want key=value", field)
		}
		if _, dup := seen[key]; dup {
			return Budget{}, fmt.Errorf("%s given twice", key)
		}
		seen[key] = val
	}
	for key := range seen {
		switch key {
		case keyNodes, keyReasons, keyNodeGroups, keySchedule, keyDuration:
		default:
			return Budget{}, fmt.Errorf("unknown key %q (want %s, %s, %s, %s or %s)",
				key, keyNodes, keyReasons, keyNodeGroups, keySchedule, keyDuration)
		}
	}
	nodes, ok := seen[keyNodes]
	if !ok {
		return Budget{}, fmt.Errorf("%s is required", keyNodes)
	}
	var err error
	if b.Nodes, err = parseNodes(nodes); err != nil {
		return Budget{}, err
	}
	if b.Reasons, err = parseReasons(seen[keyReasons]); err != nil {
		return Budget{}, err
	}
	if re, ok := seen[keyNodeGroups]; ok && re != "" {
		if b.NodeGroups, err = regexp.Compile(re); err != nil {
			return Budget{}, fmt.Errorf("%s: %w", keyNodeGroups, err)
		}
	}
	spec, hasSchedule := seen[keySchedule]
	dur, hasDuration := seen[keyDuration]
	switch {
	case hasSchedule && !hasDuration:
		return Budget{}, fmt.Errorf("%s needs a %s", keySchedule, keyDuration)
	case hasDuration && !hasSchedule:
		return Budget{}, fmt.Errorf("%s is only allowed with a %s", keyDuration, keySchedule)
	case hasSchedule:
		if b.Schedule, err = parseSchedule(spec); err != nil {
			return Budget{}, err
		}
		b.ScheduleSpec = spec
		if b.Duration, err = time.ParseDuration(dur); err != nil {
			return Budget{}, fmt.Errorf("%s: %w", keyDuration, err)
		}
		if b.Duration <= 0 {
			return Budget{}, fmt.Errorf("%s %q: must be positive", keyDuration, dur)
		}
	}
	return b, nil
}

func parseNodes(s string) (Nodes, error) {
	bad := fmt.Errorf("%s %q: want a count (\"3\") or a whole percentage from 0%% to 100%% (\"10%%\")", keyNodes, s)
	digits, percent := strings.CutSuffix(s, "%")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return Nodes{}, bad
	}
	v, err := strconv.Atoi(digits)
	if err != nil || (percent && v > 100) {
		return Nodes{}, bad
	}
	return Nodes{Value: v, Percent: percent}, nil
}

func parseReasons(s string) ([]disruption.Reason, error) {
	if s == "" {
		return nil, nil
	}
	var out []disruption.Reason
	for _, name := range strings.Split(s, ",") {
		r, err := disruption.ParseReason(strings.ToLower(strings.TrimSpace(name)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyReasons, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// scheduleProbe is a fixed time from which a schedule must fire within the
// cron library's five-year horizon; "0 0 30 2 *" never does.
var scheduleProbe = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

func parseSchedule(spec string) (cron.Schedule, error) {
	switch {
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, fmt.Errorf("%s %q: schedules are in UTC; a time zone is not supported", keySchedule, spec)
	case strings.HasPrefix(spec, "@every"):
		return nil, fmt.Errorf("%s %q: @every has no fixed times; use five fields or a named schedule such as @hourly or @daily", keySchedule, spec)
	case !strings.HasPrefix(spec, "@") && len(strings.Fields(spec)) != 5:
		return nil, fmt.Errorf("%s %q: want five fields (minute hour day-of-month month day-of-week) or a descriptor such as @daily", keySchedule, spec)
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", keySchedule, spec, err)
	}
	if s.Next(scheduleProbe).IsZero() {
		return nil, fmt.Errorf("%s %q: never fires", keySchedule, spec)
	}
	return s, nil
}

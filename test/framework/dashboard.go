package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DashboardPath is the chart's Grafana dashboard, relative to the repository root.
const DashboardPath = "charts/cluster-autoscaler/files/dashboard.json"

// DashboardQuery is one query of a panel of the chart's Grafana dashboard;
// Row is the title of the row the panel is in ("" before the first row).
type DashboardQuery struct {
	Panel, RefID, Expr, Legend, Row string
}

// OptInRowPrefix starts the title of the dashboard's rows whose series
// exist only while an opt-in feature runs and acts (the disruption engine:
// its decisions, plans in flight and savings; its interruption notices,
// read from a cloud's queue); Queries leaves their panels
// out, AllQueries has them.
const OptInRowPrefix = "Disruption"

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []DashboardPanel `json:"panels"`
}

// DashboardPanel is one panel, or a row with nested panels.
type DashboardPanel struct {
	ID      int              `json:"id"`
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []DashboardPanel `json:"panels"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// ReadDashboard parses the chart's dashboard.
func ReadDashboard() (*Dashboard, []byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, DashboardPath))
	if err != nil {
		return nil, nil, err
	}
	d, err := ParseDashboard(raw)
	return d, raw, err
}

// ParseDashboard decodes a dashboard's JSON.
func ParseDashboard(raw []byte) (*Dashboard, error) {
	d := &Dashboard{}
	if err := json.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("decoding the dashboard: %w", err)
	}
	return d, nil
}

// Queries lists the queries of every panel (rows' nested panels included),
// in order, but those of the opt-in rows (OptInRowPrefix): those a run of
// the autoscaler with the features the lifecycle test turns on answers.
func (d *Dashboard) Queries() []DashboardQuery {
	var out []DashboardQuery
	for _, q := range d.AllQueries() {
		if !strings.HasPrefix(q.Row, OptInRowPrefix) {
			out = append(out, q)
		}
	}
	return out
}

// AllQueries lists every panel's queries (rows' nested panels included), in
// order.
func (d *Dashboard) AllQueries() []DashboardQuery {
	var out []DashboardQuery
	var walk func([]DashboardPanel, string)
	walk = func(ps []DashboardPanel, row string) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
			}
			for _, t := range p.Targets {
				out = append(out, DashboardQuery{Panel: p.Title, RefID: t.RefID, Expr: t.Expr, Legend: t.LegendFormat, Row: row})
			}
			walk(p.Panels, row)
		}
	}
	walk(d.Panels, "")
	return out
}

// AllPanels lists every panel that is not a row, rows' nested panels included.
func (d *Dashboard) AllPanels() []DashboardPanel {
	var out []DashboardPanel
	var walk func([]DashboardPanel)
	walk = func(ps []DashboardPanel) {
		for _, p := range ps {
			if p.Type != "row" {
				out = append(out, p)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// The Insights page (GET /ui/insights): the figures of bot.Items.Insights
// and the live grants (list_grants), drawn as SVG on the server, so that
// no script is needed. Each chart is an image with a title and a
// description (its text alternative, a sentence of the figures) and the
// same figures in a table beside it. Colours come from the stylesheet
// (classes), never from inline styles, which the page's CSP forbids.

// chartW is the width of every chart's viewBox; charts scale to the page.
const chartW = 400

// svgBar is one rectangle of a chart, with the text it carries.
type svgBar struct {
	X, Y, W, H float64
	Class      string
	Tip        string // the bar's <title>: its figure in words
}

// svgText is one label of a chart.
type svgText struct {
	X, Y   float64
	Anchor string // start, middle, end
	Class  string
	Text   string
}

// chart is one SVG chart: ID names its title and description.
type chart struct {
	ID, Title, Desc string
	H               float64
	Bars            []svgBar
	Texts           []svgText
	Empty           string // said instead of the chart when there is nothing to draw
}

// hbar is one bar of a horizontal bar chart: a label and its segments.
type hbar struct {
	Label string
	Segs  []seg
	Note  string // written after the bar ("3 of 4 within 5 s")
}

type seg struct {
	V     float64
	Class string
	Tip   string
}

// hbars lays out a horizontal bar chart: labels left, bars scaled to the
// largest total, a note right of each bar.
func hbars(id, title, desc string, rows []hbar) chart {
	const labelW, noteW, rowH, top = 150.0, 80.0, 26.0, 6.0
	c := chart{ID: id, Title: title, Desc: desc, H: top*2 + rowH*float64(len(rows))}
	maxV := 0.0
	for _, r := range rows {
		t := 0.0
		for _, s := range r.Segs {
			t += s.V
		}
		maxV = max(maxV, t)
	}
	span := chartW - labelW - noteW - 8
	for i, r := range rows {
		y := top + rowH*float64(i)
		c.Texts = append(c.Texts, svgText{X: labelW - 6, Y: y + rowH/2 + 4, Anchor: "end", Class: "lbl", Text: bot.OneLine(r.Label, 18)})
		x := labelW
		for _, s := range r.Segs {
			w := 0.0
			if maxV > 0 {
				w = span * s.V / maxV
			}
			if w > 0 {
				c.Bars = append(c.Bars, svgBar{X: x, Y: y + 4, W: w, H: rowH - 8, Class: s.Class, Tip: s.Tip})
			}
			x += w
		}
		c.Texts = append(c.Texts, svgText{X: x + 4, Y: y + rowH/2 + 4, Anchor: "start", Class: "val", Text: r.Note})
	}
	return c
}

// outcomeClasses are the decisions chart's series, in stacking order.
var outcomes = []struct{ Name, Class string }{
	{"approved", "c-approved"}, {"approved with changes", "c-edited"}, {"by grant", "c-granted"},
	{"denied", "c-denied"}, {"expired", "c-expired"},
}

func dayValues(d bot.DayOutcomes) []int {
	return []int{d.Approved, d.Edited, d.Granted, d.Denied, d.Expired}
}

// dayColumns lays out the decisions per day as stacked columns, one a day.
func dayColumns(in bot.Insights) chart {
	const left, bottom, top, h = 28.0, 22.0, 8.0, 150.0
	c := chart{ID: "decisions", Title: fmt.Sprintf("Decisions per day, last %d days", in.Days), H: h + top + bottom}
	maxV, total := 0, 0
	var parts []string
	for _, d := range in.Decisions {
		maxV = max(maxV, d.Total())
		total += d.Total()
	}
	for i, o := range outcomes {
		n := 0
		for _, d := range in.Decisions {
			n += dayValues(d)[i]
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o.Name))
		}
	}
	if total == 0 {
		c.Empty = fmt.Sprintf("No decisions in the last %d days.", in.Days)
		c.Desc = c.Empty
		return c
	}
	c.Desc = fmt.Sprintf("%s in the last %d days: %s. The busiest day had %d.", decisions(total), in.Days, strings.Join(parts, ", "), maxV)
	step := (chartW - left - 4) / float64(len(in.Decisions))
	w := max(step*0.7, 2)
	c.Texts = append(c.Texts, svgText{X: left - 4, Y: top + 8, Anchor: "end", Class: "val", Text: strconv.Itoa(maxV)},
		svgText{X: left - 4, Y: top + h, Anchor: "end", Class: "val", Text: "0"})
	for i, d := range in.Decisions {
		x := left + step*float64(i) + (step-w)/2
		y := top + h
		for j, v := range dayValues(d) {
			if v == 0 {
				continue
			}
			bh := h * float64(v) / float64(maxV)
			y -= bh
			c.Bars = append(c.Bars, svgBar{X: x, Y: y, W: w, H: bh, Class: outcomes[j].Class, Tip: fmt.Sprintf("%s: %d %s", d.Day, v, outcomes[j].Name)})
		}
		if len(in.Decisions) <= 16 || i%2 == 0 {
			c.Texts = append(c.Texts, svgText{X: x + w/2, Y: top + h + 15, Anchor: "middle", Class: "val", Text: strings.TrimLeft(d.Day[8:], "0")})
		}
	}
	return c
}

// short writes a duration for a chart: 45s, 12m, 3.5h, 2.0d.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	}
	return fmt.Sprintf("%.1fd", d.Hours()/24)
}

type insightsData struct {
	In        bot.Insights
	Charts    []chart
	Outcomes  []string
	Flagged   []bot.ApproverSpeed
	Quick     string // "5s"
	Grants    []grantRow
	GrantsErr string
}

func (h *Handler) insights(w http.ResponseWriter, r *http.Request) {
	caller := callerOf(r)
	days := bot.DefaultInsightDays
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > bot.MaxInsightDays {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("days must be a number of days from 1 to %d, such as 14.", bot.MaxInsightDays))
			return
		}
		days = n
	}
	in, err := h.o.Bot.Items().Insights(r.Context(), caller, days)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := insightsData{In: in, Quick: short(bot.QuickApproval)}
	for _, o := range outcomes {
		d.Outcomes = append(d.Outcomes, o.Name)
	}

	// The queue now, by age.
	var rows []hbar
	var parts []string
	for _, b := range in.Queue {
		rows = append(rows, hbar{Label: b.Label, Segs: []seg{{V: float64(b.N), Class: "c-queue", Tip: fmt.Sprintf("%d waiting %s", b.N, b.Label)}}, Note: strconv.Itoa(b.N)})
		if b.N > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", b.N, b.Label))
		}
	}
	q := hbars("queue", "The queue now, by age", "", rows)
	if in.Open == 0 {
		q.Empty = "Nothing awaits a decision."
		q.Desc = q.Empty
	} else {
		q.Desc = fmt.Sprintf("%d item(s) await a decision: %s. The oldest has waited %s.", in.Open, strings.Join(parts, ", "), chat.RoundDuration(in.Oldest))
	}
	d.Charts = append(d.Charts, q, dayColumns(in))

	// Time to decision per tool: the median bar, then on to the p90.
	rows, parts = nil, nil
	for _, l := range in.Latency {
		rows = append(rows, hbar{Label: l.Tool, Segs: []seg{
			{V: l.Median.Seconds(), Class: "c-median", Tip: fmt.Sprintf("%s: median %s", l.Tool, short(l.Median))},
			{V: (l.P90 - l.Median).Seconds(), Class: "c-p90", Tip: fmt.Sprintf("%s: p90 %s", l.Tool, short(l.P90))},
		}, Note: short(l.Median) + " / " + short(l.P90)})
		parts = append(parts, fmt.Sprintf("%s median %s, p90 %s (%s)", l.Tool, short(l.Median), short(l.P90), decisions(l.N)))
	}
	lat := hbars("latency", "Time to decision per tool (median / p90)", "", rows)
	if len(rows) == 0 {
		lat.Empty = fmt.Sprintf("No decisions by people in the last %d days.", in.Days)
		lat.Desc = lat.Empty
	} else {
		lat.Desc = "Time from the card appearing to the decision: " + strings.Join(parts, "; ") + "."
	}

	// Approvals within a few seconds of the card, per approver.
	rows, parts = nil, nil
	for _, a := range in.Approvers {
		rows = append(rows, hbar{Label: a.Name, Segs: []seg{
			{V: float64(a.Quick), Class: "c-quick", Tip: fmt.Sprintf("%s: %d within %s", a.Name, a.Quick, d.Quick)},
			{V: float64(a.Approvals - a.Quick), Class: "c-read", Tip: fmt.Sprintf("%s: %d after %s or later", a.Name, a.Approvals-a.Quick, d.Quick)},
		}, Note: fmt.Sprintf("%d of %d", a.Quick, a.Approvals)})
		parts = append(parts, fmt.Sprintf("%s %d of %d", a.Name, a.Quick, a.Approvals))
		if a.Quick > 0 {
			d.Flagged = append(d.Flagged, a)
		}
	}
	quick := hbars("quick", "Approvals within "+d.Quick+" of the card appearing, per approver", "", rows)
	if len(rows) == 0 {
		quick.Empty = fmt.Sprintf("No approvals in the last %d days.", in.Days)
		quick.Desc = quick.Empty
	} else {
		quick.Desc = "Approvals made within " + d.Quick + " of the card appearing, of all approvals: " + strings.Join(parts, "; ") + "."
	}
	d.Charts = append(d.Charts, lat, quick)

	// Grants in use, through list_grants (its scope rule).
	var out struct {
		Grants []grantRow `json:"grants"`
	}
	if _, err := h.call(r.Context(), caller, "list_grants", map[string]any{}, &out); err != nil {
		if msg, ok := userError(err); ok {
			d.GrantsErr = msg
		} else {
			h.internal(w, r, err)
			return
		}
	}
	d.Grants = out.Grants
	rows, parts = nil, nil
	for _, g := range out.Grants {
		label := fmt.Sprintf("#%d %s", g.ID, g.Tool)
		rows = append(rows, hbar{Label: label, Segs: []seg{{V: float64(g.Uses), Class: "c-granted", Tip: fmt.Sprintf("%s: used %d time(s)", label, g.Uses)}}, Note: fmt.Sprintf("%d use(s)", g.Uses)})
		parts = append(parts, fmt.Sprintf("grant #%d (%s, %s for %s) used %d time(s)", g.ID, g.Tool, g.Kind, g.AgentName, g.Uses))
	}
	gr := hbars("grants", "Standing grants in force, by use", "", rows)
	if len(rows) == 0 {
		gr.Empty = "No standing grants in force that you may see."
		gr.Desc = gr.Empty
	} else {
		gr.Desc = strings.Join(parts, "; ") + "."
	}
	d.Charts = append(d.Charts, gr)
	h.render(w, r, http.StatusOK, "insights", page{Title: "Insights", Nav: "insights", Data: d})
}

// decisions is "1 decision" or "n decisions".
func decisions(n int) string {
	if n == 1 {
		return "1 decision"
	}
	return strconv.Itoa(n) + " decisions"
}

// f1 writes a coordinate for an SVG attribute.
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

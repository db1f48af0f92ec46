package ui

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The utilization charts of a cluster page, /clusters/{ns}/{name}/util/
// {cpu,mem,gpu}.svg: one line per node over the last utilWindow, in
// percent, drawn on the server from the probe's samples (what the head's
// dashboard publishes at /nodes?view=summary). Plain SVG with no script,
// shown by <img>: the page's CSP allows only its own images.

// chart sizes, in SVG user units.
const (
	chartW, chartH = 360, 120
	chartPad       = 4
)

// palette colours the nodes' lines.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// chartTitles name the charts.
var chartTitles = map[string]string{"cpu": "CPU %", "mem": "Memory %", "gpu": "GPU %"}

func (s *Server) utilChart(w http.ResponseWriter, r *http.Request) {
	metric, ok := strings.CutSuffix(r.PathValue("metric"), ".svg")
	if _, known := chartTitles[metric]; !ok || !known {
		http.Error(w, "unknown chart: want cpu.svg, mem.svg or gpu.svg", http.StatusNotFound)
		return
	}
	rec := s.find(w, r)
	if rec == nil {
		return
	}
	p, release := s.shared().probes.acquire(rec)
	defer release()
	_, nodes, _, _ := p.state()
	w.Header().Set("Content-Type", "image/svg+xml")
	writeChart(w, metric, nodes, time.Now())
}

// pick is the value of metric in a sample; false when the node has none.
func pick(metric string, s Sample) (float64, bool) {
	switch metric {
	case "cpu":
		return s.CPU, true
	case "mem":
		return s.Mem, true
	}
	return s.GPU, s.GPU >= 0
}

// writeChart draws metric of every node over the utilWindow before now.
func writeChart(w io.Writer, metric string, nodes map[string][]Sample, now time.Time) {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	plotH := chartH - 2*chartPad
	height := chartH + 14*((len(names)+1)/2) + 6 // and the legend
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, chartW, height, chartW, height)
	fmt.Fprintf(w, `<title>%s, last %s</title>`, chartTitles[metric], utilWindow)
	fmt.Fprintf(w, `<rect x="0" y="0" width="%d" height="%d" fill="#fff" stroke="#ccc"/>`, chartW, plotH+2*chartPad)
	for _, pct := range []int{50, 100} {
		y := float64(chartPad) + float64(plotH)*(1-float64(pct)/100)
		fmt.Fprintf(w, `<line x1="0" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="2" y="%.1f" font-size="9" fill="#999">%d%%</text>`,
			chartW, y, y, y+9, pct)
	}
	drawn := 0
	for i, name := range names {
		var pts []string
		for _, s := range nodes[name] {
			v, ok := pick(metric, s)
			if !ok {
				continue
			}
			x := float64(chartW) * (1 - now.Sub(s.At).Seconds()/utilWindow.Seconds())
			y := float64(chartPad) + float64(plotH)*(1-min(max(v, 0), 100)/100)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		if len(pts) == 0 {
			continue
		}
		color := palette[i%len(palette)]
		if len(pts) == 1 {
			pts = append(pts, pts[0]) // a dot until the next sample
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-linecap="round" points="%s"/>`, color, strings.Join(pts, " "))
		lx, ly := 4+(drawn%2)*(chartW/2), plotH+2*chartPad+12+14*(drawn/2)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="8" height="8" fill="%s"/><text x="%d" y="%d" font-size="10">%s</text>`,
			lx, ly-8, color, lx+11, ly, html.EscapeString(name))
		drawn++
	}
	if drawn == 0 {
		fmt.Fprintf(w, `<text x="%d" y="%d" font-size="11" fill="#666" text-anchor="middle">no data yet</text>`, chartW/2, plotH/2+chartPad)
	}
	fmt.Fprint(w, `</svg>`)
}

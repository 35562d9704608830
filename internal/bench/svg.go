package bench

import (
	"fmt"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"html"
	"math"
	"strings"
)

// Bar is one row of a Chart.
type Bar struct {
	Label   string
	Value   float64 // drawn on a log scale
	Text    string  // beside the bar
	Alert   string  // in red under Text, if set
	Color   string  // CSS colour of the bar
	Tooltip string
}

// Chart is a horizontal bar chart on a log scale (the values span orders
// of magnitude). Hand-written SVG: no dependencies.
type Chart struct {
	Title, Subtitle, Legend string
	Bars                    []Bar
}

// SVG draws the chart.
func (c Chart) SVG() string {
	const (
		width, left, right = 900, 170, 250
		top, rowH, barH    = 70, 44, 24
	)
	rows := c.Bars
	height := top + rowH*len(rows) + 60
	plotW := float64(width - left - right)
	maxV := 1.0
	for _, r := range rows {
		maxV = max(maxV, r.Value)
	}
	lo := maxV // the smallest row sets the first decade
	for _, r := range rows {
		if r.Value > 0 {
			lo = min(lo, r.Value)
		}
	}
	loExp := math.Floor(math.Log10(max(lo, 1)))
	hiExp := math.Ceil(math.Log10(maxV))
	if hiExp <= loExp {
		hiExp = loExp + 1
	}
	x := func(v float64) float64 {
		if v <= 0 {
			return 0
		}
		f := (math.Log10(v) - loExp) / (hiExp - loExp)
		return math.Max(0, math.Min(1, f)) * plotW
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif" font-size="13">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>`+"\n", left-150, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="#555">%s</text>`+"\n", left-150, html.EscapeString(c.Subtitle))
	for e := loExp; e <= hiExp; e++ {
		gx := float64(left) + x(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, top-6, gx, top+rowH*len(rows))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#777">%s</text>`+"\n", gx, top+rowH*len(rows)+18, loadgen.Thousands(int64(math.Pow(10, e))))
	}
	for i, r := range rows {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+barH/2+5, html.EscapeString(r.Label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" rx="3"><title>%s</title></rect>`+"\n",
			left, y, math.Max(x(r.Value), 1), barH, html.EscapeString(r.Color), html.EscapeString(r.Tooltip))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(left)+x(r.Value)+8, y+barH/2+5, html.EscapeString(r.Text))
		if r.Alert != "" {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#dc2626" font-weight="bold">%s</text>`+"\n",
				float64(left)+x(r.Value)+8, y+barH/2+20, html.EscapeString(r.Alert))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", left-150, height-12, html.EscapeString(c.Legend))
	b.WriteString("</svg>\n")
	return b.String()
}

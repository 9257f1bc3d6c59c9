package console

import (
	"fmt"
	"time"

	"github.com/runseal/runseal/api/server"
)

// Plot geometry, in SVG user units; the SVG scales to its box.
const (
	plotW, plotH     = 1100.0, 120.0
	plotLeft, plotPB = 56.0, 22.0 // room for the y labels and the x labels
	plotTop          = 10.0
)

// plot is one bar chart, drawn by the template as inline SVG: no script,
// and only presentation attributes, which the CSP allows.
type plot struct {
	Caption string
	W, H    float64
	Charts  []chart
}

type chart struct {
	Label  string // what is plotted, per second
	Class  string // the bars' CSS class
	Max    string // the y axis's top, per second
	Total  uint64
	Bars   []bar
	XStart string
	XEnd   string
	Y0, Y1 float64 // the axis line's ends
	X0, X1 float64
}

type bar struct {
	X, Y, W, H float64
	Title      string
}

// newPlot draws a window's records/s and seals/s as two bar charts.
func newPlot(s server.ActivitySeries, caption string) plot {
	p := plot{Caption: caption, W: plotW, H: plotH}
	step := float64(s.StepSeconds)
	pick := []struct {
		label, class string
		val          func(server.ActivityPoint) uint64
	}{
		{"records appended /s", "bar-append", func(p server.ActivityPoint) uint64 { return p.Records }},
		{"seals /s", "bar-seal", func(p server.ActivityPoint) uint64 { return p.Seals }},
	}
	for _, k := range pick {
		c := chart{Label: k.label, Class: k.class, X0: plotLeft, X1: plotW, Y0: plotTop, Y1: plotH - plotPB}
		var top uint64
		for _, pt := range s.Points {
			top = max(top, k.val(pt))
			c.Total += k.val(pt)
		}
		maxRate := niceCeil(float64(top) / step)
		c.Max = rateText(maxRate)
		n := float64(len(s.Points))
		bw := (plotW - plotLeft) / max(n, 1)
		for i, pt := range s.Points {
			v := float64(k.val(pt)) / step
			h := 0.0
			if maxRate > 0 {
				h = v / maxRate * (plotH - plotPB - plotTop)
			}
			c.Bars = append(c.Bars, bar{
				X: plotLeft + float64(i)*bw, W: max(bw-1, 0.5), Y: plotH - plotPB - h, H: h,
				Title: fmt.Sprintf("%s: %d (%s /s)", pt.At.Format("15:04"), k.val(pt), rateText(v)),
			})
		}
		if len(s.Points) > 0 {
			layout := "15:04"
			if len(s.Points)*s.StepSeconds > 3600 {
				layout = "Jan 2 15:04"
			}
			end := s.Points[len(s.Points)-1].At.Add(time.Duration(s.StepSeconds) * time.Second)
			c.XStart, c.XEnd = s.Points[0].At.Format(layout), end.Format(layout)+" UTC"
		}
		p.Charts = append(p.Charts, c)
	}
	return p
}

// niceCeil rounds a positive rate up to 1, 2 or 5 times a power of ten, so
// the axis reads well; 0 stays 0.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	m := 1e-6
	for m*10 <= v {
		m *= 10
	}
	for _, f := range []float64{1, 2, 5, 10} {
		if f*m >= v {
			return f * m
		}
	}
	return 10 * m
}

func rateText(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

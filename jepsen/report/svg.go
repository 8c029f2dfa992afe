package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// Plot geometry, in SVG user units.
const (
	svgWidth    = 1100
	svgHeight   = 460
	plotLeft    = 80
	plotRight   = 1020
	plotTop     = 60
	plotBottom  = 400
	maxDots     = 20000 // beyond this, every n-th op is drawn
	claimColor  = "#1f77b4"
	finishColor = "#ff7f0e"
	tputColor   = "#2ca02c"
)

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder never fail
	return b.String()
}

// logScale maps a latency in ms onto [plotBottom, plotTop] between lo and
// hi (powers of ten).
type logScale struct{ lo, hi float64 }

func (s logScale) y(ms float64) float64 {
	ms = math.Min(math.Max(ms, s.lo), s.hi)
	f := (math.Log10(ms) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	return plotBottom - f*(plotBottom-plotTop)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// latencySVG plots the latency of every ok claim and complete as a dot
// (log scale, left axis) and ok ops per second as a line (right axis)
// over the run, with each fault's period shaded and labelled.
func latencySVG(run Run, ops []history.Op, faults []history.Fault) []byte {
	var end time.Duration
	for _, op := range ops {
		end = max(end, op.Invoke, op.Return)
	}
	for _, f := range faults {
		end = max(end, f.Start, f.End)
	}
	end = max(end, time.Second)
	xOf := func(t time.Duration) float64 {
		return plotLeft + float64(t)/float64(end)*(plotRight-plotLeft)
	}

	type dot struct {
		t       time.Duration
		ms      float64
		isClaim bool
	}
	var dots []dot
	seconds := int(end/time.Second) + 1
	perSecond := make([]int, seconds)
	minMS, maxMS := math.Inf(1), 0.0
	for _, op := range ops {
		if op.Outcome != history.OutcomeOK || op.Return < op.Invoke {
			continue
		}
		perSecond[int(op.Invoke/time.Second)]++
		if op.Type != history.OpClaim && op.Type != history.OpComplete {
			continue
		}
		ms := math.Max(millis(op.Return-op.Invoke), 0.01)
		minMS, maxMS = math.Min(minMS, ms), math.Max(maxMS, ms)
		dots = append(dots, dot{op.Invoke, ms, op.Type == history.OpClaim})
	}
	scale := logScale{lo: 1, hi: 1000}
	if len(dots) > 0 {
		scale.lo = math.Pow(10, math.Floor(math.Log10(minMS)))
		scale.hi = math.Pow(10, math.Ceil(math.Log10(maxMS)))
		if scale.hi <= scale.lo {
			scale.hi = scale.lo * 10
		}
	}
	// ok ops per second; a last second the run covers for less than half
	// is left out (too few ops to be a rate).
	rates := make([]float64, seconds)
	maxTput := 0.0
	for s, n := range perSecond {
		covered := min(end-time.Duration(s)*time.Second, time.Second)
		if covered <= 0 || (s > 0 && covered < time.Second/2) {
			rates = rates[:s]
			break
		}
		rates[s] = float64(n) / covered.Seconds()
		maxTput = math.Max(maxTput, rates[s])
	}
	tputTop := niceCeil(maxTput)
	tputY := func(n float64) float64 { return plotBottom - n/tputTop*(plotBottom-plotTop) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	title := fmt.Sprintf("intentd fault run, seed %d: latency of ok writes and throughput", run.Seed)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))

	// Fault periods, under everything else.
	colors := nemesisColors(faults)
	for i, f := range faults {
		x0, x1 := xOf(f.Start), xOf(faultEnd(f, end))
		w := math.Max(x1-x0, 1)
		fmt.Fprintf(&b, `<rect class="fault" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" fill-opacity="0.15"><title>%s</title></rect>`+"\n",
			x0, plotTop, w, plotBottom-plotTop, colors[f.Nemesis], esc(f.Nemesis+": "+f.Detail))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="%s">%s</text>`+"\n",
			x0+2, plotTop+12+12*(i%3), colors[f.Nemesis], esc(f.Nemesis))
	}

	// Axes, grid and labels.
	fmt.Fprintf(&b, `<g stroke="#000000" stroke-width="1"><line x1="%d" y1="%d" x2="%d" y2="%d"/><line x1="%d" y1="%d" x2="%d" y2="%d"/><line x1="%d" y1="%d" x2="%d" y2="%d"/></g>`+"\n",
		plotLeft, plotBottom, plotRight, plotBottom, plotLeft, plotTop, plotLeft, plotBottom, plotRight, plotTop, plotRight, plotBottom)
	step := niceCeil(end.Seconds() / 10)
	for s := 0.0; s <= end.Seconds()+1e-9; s += step {
		x := xOf(time.Duration(s * float64(time.Second)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#000000"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
			x, plotBottom, x, plotBottom+5, x, plotBottom+18, s)
	}
	for v := scale.lo; v <= scale.hi*1.0001; v *= 10 {
		y := scale.y(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
			plotLeft, y, plotRight, y, plotLeft-6, y+4, v)
	}
	for i := 0; i <= 4; i++ {
		n := tputTop * float64(i) / 4
		y := tputY(n)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/><text x="%d" y="%.1f" fill="%s">%g</text>`+"\n",
			plotRight, y, plotRight+5, y, tputColor, plotRight+8, y+4, tputColor, n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">time since start (s)</text>`+"\n",
		(plotLeft+plotRight)/2, plotBottom+38)
	fmt.Fprintf(&b, `<text transform="translate(%d %d) rotate(-90)" text-anchor="middle">latency of ok claims and completes (ms, log scale)</text>`+"\n",
		plotLeft-55, (plotTop+plotBottom)/2)
	fmt.Fprintf(&b, `<text transform="translate(%d %d) rotate(90)" text-anchor="middle" fill="%s">ok ops per second</text>`+"\n",
		plotRight+50, (plotTop+plotBottom)/2, tputColor)

	// Latency dots.
	stride := 1
	if len(dots) > maxDots {
		stride = (len(dots) + maxDots - 1) / maxDots
	}
	for _, group := range []struct {
		claims bool
		color  string
	}{{true, claimColor}, {false, finishColor}} {
		fmt.Fprintf(&b, `<g fill="%s" fill-opacity="0.6">`+"\n", group.color)
		for i, d := range dots {
			if i%stride != 0 || d.isClaim != group.claims {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="1.6"/>`+"\n", xOf(d.t), scale.y(d.ms))
		}
		b.WriteString("</g>\n")
	}

	// Throughput, one point per second at the middle of the second.
	var pts []string
	for s, r := range rates {
		t := min(time.Duration(s)*time.Second+time.Second/2, end)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(t), tputY(r)))
	}
	fmt.Fprintf(&b, `<polyline class="throughput" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n",
		tputColor, strings.Join(pts, " "))

	// Legend.
	legend := []struct{ color, label string }{
		{claimColor, "claim latency"}, {finishColor, "complete latency"}, {tputColor, "ok ops/s (all types)"},
	}
	for i, l := range legend {
		x := plotLeft + 10 + i*170
		fmt.Fprintf(&b, `<rect x="%d" y="32" width="10" height="10" fill="%s"/><text x="%d" y="41">%s</text>`+"\n",
			x, l.color, x+14, esc(l.label))
	}
	if stride > 1 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10">every %d-th op drawn</text>`+"\n", plotRight-120, plotBottom+38, stride)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

package main

import (
	"bytes"
	"fmt"
	"image/color"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var systemColors = map[string]color.Color{
	"intentd":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"etcd-grpc": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"etcd-http": color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// plot draws throughput and p99 latency against clients (log scales), one
// line per system, mode and routing (contended dashed, spread dotted with
// square or pyramid marks and a lighter colour), as SVG, and as PNG when png is
// true.
func (r *report) plot(png bool) ([]byte, error) {
	sums := r.summaries()
	ops := plot.New()
	ops.Title.Text = "Claims per second (median)"
	ops.X.Label.Text = "clients"
	ops.Y.Label.Text = "ops/s"
	ops.Y.Min = 0
	lat := plot.New()
	lat.Title.Text = "p99 latency (median)"
	lat.X.Label.Text = "clients"
	lat.Y.Label.Text = "ms (log scale)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for _, n := range r.Clients {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	// Explicit ranges keep the log scales valid with a single level or a
	// level that measured nothing.
	xMin, xMax := float64(slices.Min(r.Clients))/1.3, float64(slices.Max(r.Clients))*1.3
	latMin, latMax := 0.0, 0.0
	for _, sm := range sums {
		if sm.p99 > 0 {
			if latMin == 0 || sm.p99 < latMin {
				latMin = sm.p99
			}
			latMax = max(latMax, sm.p99)
		}
	}
	if latMin > 0 {
		lat.Y.Min, lat.Y.Max = latMin/1.5, latMax*1.5
	} else {
		lat.Y.Scale, lat.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
	}
	for _, p := range []*plot.Plot{ops, lat} {
		p.X.Min, p.X.Max = xMin, xMax
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
	}
	for _, mode := range r.Modes {
		for _, routing := range r.routings() {
			for _, fe := range r.FrontEnds {
				if err := r.plotLine(sums, ops, lat, mode, routing, fe); err != nil {
					return nil, err
				}
			}
		}
	}
	var img vg.CanvasWriterTo = vgsvg.New(11*vg.Inch, 4.2*vg.Inch)
	if png {
		img = vgimg.PngCanvas{Canvas: vgimg.New(11*vg.Inch, 4.2*vg.Inch)}
	}
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{{ops, lat}}, tiles, dc)
	ops.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	return buf.Bytes(), nil
}

// lighter mixes c halfway with white (the spread routing's lines).
func lighter(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.RGBA{R: uint8((r>>8 + 255) / 2), G: uint8((g>>8 + 255) / 2), B: uint8((b>>8 + 255) / 2), A: 0xff}
}

// plotLine adds one system's line for mode and routing to both plots.
func (r *report) plotLine(sums map[string]summary, ops, lat *plot.Plot, mode, routing, fe string) error {
	var opsXY, latXY plotter.XYs
	for _, n := range r.Clients {
		s, ok := sums[sumKey(mode, routing, fe, n)]
		if !ok {
			continue
		}
		opsXY = append(opsXY, plotter.XY{X: float64(n), Y: s.ops})
		if s.p99 > 0 {
			latXY = append(latXY, plotter.XY{X: float64(n), Y: s.p99})
		}
	}
	if len(opsXY) == 0 {
		return nil
	}
	name := fmt.Sprintf("%s %s", frontEndNames[fe], mode)
	if len(r.routings()) > 1 {
		name += ", " + routing
	}
	col := systemColors[fe]
	if routing == "spread" {
		col = lighter(col)
	}
	for _, pair := range []struct {
		p  *plot.Plot
		xy plotter.XYs
	}{{ops, opsXY}, {lat, latXY}} {
		if len(pair.xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(pair.xy)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = col
		l.Width = vg.Points(1.5)
		pts.Color = col
		pts.Shape = draw.CircleGlyph{}
		if routing == "spread" {
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			pts.Shape = draw.BoxGlyph{}
		}
		if mode == "contended" {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			pts.Shape = draw.TriangleGlyph{}
			if routing == "spread" {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(2), vg.Points(1), vg.Points(2)}
				pts.Shape = draw.PyramidGlyph{}
			}
		}
		pair.p.Add(l, pts)
		pair.p.Legend.Add(name, l, pts)
	}
	return nil
}

package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot file names, written by Plots.
const (
	WaitCDFPNG     = "wait-cdf.png"
	UtilisationPNG = "utilisation.png"
	LocalityPNG    = "locality.png"
	WaitsPNG       = "waits.png"
)

// Plots draws the PNGs of an evaluation into dir: the wait CDF per user tier (one panel per
// tier, a line per setup, every seed's jobs pooled), useful GPU utilisation over time on the
// first seed (the runs of different seeds do not line up in time), and worker locality and
// mean and p95 wait per setup, as means over the seeds with their 95% intervals. runs[i] are
// the runs on c.Seeds[i].
func Plots(dir string, runs [][]Run, c Comparison) error {
	if len(runs) == 0 || len(runs) != len(c.Seeds) {
		return fmt.Errorf("plots: runs of %d seeds for %d seeds", len(runs), len(c.Seeds))
	}
	if err := waitCDFs(filepath.Join(dir, WaitCDFPNG), runs, c); err != nil {
		return err
	}
	title := fmt.Sprintf("GPUs held by running jobs (useful utilisation), seed %d", c.Seeds[0])
	if len(c.Seeds) > 1 {
		title += fmt.Sprintf(", the first of %d", len(c.Seeds))
	}
	if err := utilisation(filepath.Join(dir, UtilisationPNG), title, runs[0]); err != nil {
		return err
	}
	over := overSeeds(len(c.Seeds))
	if err := intervalBars(filepath.Join(dir, LocalityPNG), "worker locality (every bound worker)"+over, "share of workers", c,
		[]labelled{{"on a PS's node", FigLocalityNode}, {"on a PS's node or rack", FigLocalityRack}}); err != nil {
		return err
	}
	return intervalBars(filepath.Join(dir, WaitsPNG), "wait, arrival to all pods bound"+over, "simulated minutes", c,
		[]labelled{{"mean wait", FigMeanWait}, {"p95 wait", FigP95Wait}})
}

// overSeeds tells in a title what a bar stands for.
func overSeeds(n int) string {
	if n == 1 {
		return ", one seed"
	}
	return fmt.Sprintf(", mean over %d seeds with 95%% intervals", n)
}

// CDF returns the points of the empirical CDF of xs: (x, share of values <= x), sorted.
func CDF(xs []float64) plotter.XYs {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	out := make(plotter.XYs, 0, len(s)+1)
	out = append(out, plotter.XY{X: 0, Y: 0})
	for i, x := range s {
		out = append(out, plotter.XY{X: x, Y: float64(i+1) / float64(len(s))})
	}
	return out
}

func waitCDFs(path string, runs [][]Run, c Comparison) error {
	pooled := ""
	if len(runs) > 1 {
		pooled = fmt.Sprintf(" (%d seeds' jobs pooled)", len(runs))
	}
	row := make([]*plot.Plot, len(Tiers))
	for i, tier := range Tiers {
		p := plot.New()
		p.Title.Text = "wait, tier " + tier + pooled
		p.X.Label.Text = "wait (simulated minutes)"
		p.Y.Label.Text = "share of jobs"
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top = false
		p.Legend.Left = false
		for k, s := range c.Setups {
			var xs []float64
			for _, seed := range runs {
				for _, run := range seed {
					if run.Setup != s.Setup {
						continue
					}
					for _, r := range run.Jobs {
						if r.Job.Tier == tier {
							w, _ := r.Wait(run.End)
							xs = append(xs, Minutes(w))
						}
					}
				}
			}
			if err := addLine(p, k, s.Setup, CDF(xs), i == 0); err != nil {
				return err
			}
		}
		row[i] = p
	}
	const w, h = 33 * vg.Centimeter, 11 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: 4 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	plots := [][]*plot.Plot{row}
	canvases := plot.Align(plots, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	return savePNG(path, img)
}

func utilisation(path, title string, runs []Run) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (simulated minutes)"
	p.Y.Label.Text = "share of GPUs"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = true
	for k, run := range runs {
		xys := make(plotter.XYs, 0, len(run.Samples))
		for _, s := range run.Samples {
			if run.GPUs > 0 {
				xys = append(xys, plotter.XY{X: Minutes(s.At), Y: float64(s.UsefulGPU) / float64(run.GPUs)})
			}
		}
		if err := addLine(p, k, run.Setup, xys, true); err != nil {
			return err
		}
	}
	return p.Save(22*vg.Centimeter, 11*vg.Centimeter, path)
}

// labelled is a figure with its legend label.
type labelled struct {
	label  string
	figure Figure
}

// intervalBars draws a group of bars per setup, one per figure, at the figure's mean over the
// seeds, with its 95% interval as an error bar (none on one seed).
func intervalBars(path, title, yLabel string, c Comparison, figures []labelled) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	if len(figures) > 0 && figures[0].figure.Unit == UnitShare {
		p.Y.Max = 1
	}
	p.Legend.Top = true
	names := make([]string, len(c.Setups))
	for i, s := range c.Setups {
		names[i] = s.Setup
	}
	width := vg.Points(14)
	for k, fig := range figures {
		means := make(plotter.Values, len(c.Setups))
		var ends plotter.XYs
		var errs plotter.YErrors
		for i, s := range c.Setups {
			iv := s.Across(fig.figure)
			means[i] = iv.Mean
			if iv.Bounded() {
				ends = append(ends, plotter.XY{X: float64(i), Y: iv.Mean})
				errs = append(errs, struct{ Low, High float64 }{iv.HalfWidth, iv.HalfWidth})
			}
		}
		bars, err := plotter.NewBarChart(means, width)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(k)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(2*k-(len(figures)-1)) * width / 2 // the group centred on its setup
		p.Add(bars)
		p.Legend.Add(fig.label, bars)
		if len(ends) > 0 {
			p.Add(shiftedErrorBars{YErrorBars: &plotter.YErrorBars{XYs: ends, YErrors: errs,
				LineStyle: plotter.DefaultLineStyle, CapWidth: width / 2}, dx: bars.Offset})
		}
	}
	p.NominalX(names...)
	// Half a slot beside the outer groups, and headroom for the legend above the bars.
	p.X.Min, p.X.Max = -0.5, float64(len(c.Setups))-0.5
	p.Y.Max *= 1.2
	// 3 cm a setup keeps the names under the bars from running into each other.
	return p.Save(max(22*vg.Centimeter, vg.Length(len(c.Setups))*3*vg.Centimeter), 10*vg.Centimeter, path)
}

// shiftedErrorBars draws error bars dx to the side, onto bars drawn at that Offset: a bar
// chart offsets its bars in canvas units, which data coordinates cannot express.
type shiftedErrorBars struct {
	*plotter.YErrorBars
	dx vg.Length
}

// Plot implements plot.Plotter.
func (e shiftedErrorBars) Plot(c draw.Canvas, p *plot.Plot) {
	c.Push()
	defer c.Pop()
	c.Translate(vg.Point{X: e.dx})
	e.YErrorBars.Plot(c, p)
}

// addLine adds a line for setup k, in the setup's colour and dash pattern.
func addLine(p *plot.Plot, k int, name string, xys plotter.XYs, legend bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = plotutil.Color(k)
	l.Dashes = plotutil.Dashes(k)
	l.Width = vg.Points(1.5)
	p.Add(l)
	if legend {
		p.Legend.Add(name, l)
	}
	return nil
}

func savePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

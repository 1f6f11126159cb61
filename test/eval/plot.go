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
)

// Plots draws the PNGs of runs into dir: the wait CDF per user tier (one panel per tier, a
// line per setup), useful GPU utilisation over time, and worker locality per setup.
func Plots(dir string, runs []Run, sums []Summary) error {
	if err := waitCDFs(filepath.Join(dir, WaitCDFPNG), runs); err != nil {
		return err
	}
	if err := utilisation(filepath.Join(dir, UtilisationPNG), runs); err != nil {
		return err
	}
	return locality(filepath.Join(dir, LocalityPNG), sums)
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

func waitCDFs(path string, runs []Run) error {
	row := make([]*plot.Plot, len(Tiers))
	for i, tier := range Tiers {
		p := plot.New()
		p.Title.Text = "wait, tier " + tier
		p.X.Label.Text = "wait (simulated minutes)"
		p.Y.Label.Text = "share of jobs"
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top = false
		p.Legend.Left = false
		for k, run := range runs {
			var xs []float64
			for _, r := range run.Jobs {
				if r.Job.Tier == tier {
					w, _ := r.Wait(run.End)
					xs = append(xs, Minutes(w))
				}
			}
			if err := addLine(p, k, run.Setup, CDF(xs), i == 0); err != nil {
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

func utilisation(path string, runs []Run) error {
	p := plot.New()
	p.Title.Text = "GPUs held by running jobs (useful utilisation)"
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

func locality(path string, sums []Summary) error {
	p := plot.New()
	p.Title.Text = "worker locality (every bound worker)"
	p.Y.Label.Text = "share of workers"
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = true
	node := make(plotter.Values, len(sums))
	rack := make(plotter.Values, len(sums))
	names := make([]string, len(sums))
	for i, s := range sums {
		node[i], rack[i], names[i] = s.LocalityNode, s.LocalityRack, s.Setup
	}
	width := vg.Points(14)
	for k, v := range []struct {
		label  string
		values plotter.Values
	}{{"on a PS's node", node}, {"on a PS's node or rack", rack}} {
		bars, err := plotter.NewBarChart(v.values, width)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(k)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(2*k-1) * width / 2
		p.Add(bars)
		p.Legend.Add(v.label, bars)
	}
	p.NominalX(names...)
	return p.Save(22*vg.Centimeter, 10*vg.Centimeter, path)
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

package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cutenative/cutenative/go/internal/x/image/font"
	"github.com/cutenative/cutenative/go/internal/x/image/font/gofont/goregular"
	"github.com/cutenative/cutenative/go/internal/x/image/font/opentype"
	"github.com/cutenative/cutenative/go/internal/x/image/math/fixed"
)

const (
	chartWidth  = 1000
	chartHeight = 500

	titleSize = 18 // pixels (the faces are made at 72 DPI, so points = pixels)
	labelSize = 13 // tick labels, legend and axis names
	pad       = 8  // margin at the canvas edges
	tickGap   = 12 // minimum gap in pixels between neighbouring x tick labels
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colGrid       = color.RGBA{232, 232, 232, 255}
	colAxis       = color.RGBA{80, 80, 80, 255}
	colText       = color.RGBA{60, 60, 60, 255}
	colTitle      = color.RGBA{20, 20, 20, 255}
	colHistory    = color.RGBA{30, 30, 30, 255}
	colMedian     = color.RGBA{31, 119, 180, 255}
	colBand       = color.NRGBA{31, 119, 180, 70} // translucent, blended over the grid
	colSeparator  = color.RGBA{150, 150, 150, 255}
)

// chart is a fan chart: an observed history followed by a forecast with
// its median and a lower/upper band.
type chart struct {
	Title                string    // drawn above the plot, e.g. the series name and the model; none if empty
	XName, YName         string    // axis names; "time step" and "value" if empty
	BandLow, BandHigh    float64   // quantile levels of Lower and Upper, named in the legend (0 = unknown)
	Labels               []string  // x labels: one per history point, then one per forecast step
	History              []float64 // observed values; NaN = missing
	Lower, Median, Upper []float64 // forecast, one value per step
}

// goRegular is the Go Regular font (golang.org/x/image/font/gofont, BSD licence), parsed once.
var goRegular = sync.OnceValue(func() *opentype.Font {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		panic("cutenative-demo: parsing Go Regular: " + err.Error())
	}
	return f
})

// newFace returns a Go Regular face of size pixels. Faces cache glyphs and
// are not safe for concurrent use, so each render makes its own.
func newFace(size float64) font.Face {
	face, err := opentype.NewFace(goRegular(), &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		panic("cutenative-demo: making a face: " + err.Error())
	}
	return face
}

// textWidth is the advance width in pixels of s in face.
func textWidth(face font.Face, s string) int {
	return font.MeasureString(face, s).Ceil()
}

// lineHeight is the height in pixels of a line of face, ascent plus descent.
func lineHeight(face font.Face) int {
	m := face.Metrics()
	return (m.Ascent + m.Descent).Ceil()
}

// drawText draws s in face with the top-left corner of its line box at (x, y).
func drawText(img draw.Image, face font.Face, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face,
		Dot: fixed.Point26_6{X: fixed.I(x), Y: fixed.I(y) + face.Metrics().Ascent}}
	d.DrawString(s)
}

// drawTextUp draws s rotated a quarter turn counter-clockwise (read from
// bottom to top) with the top-left corner of its rotated box at (x, y).
func drawTextUp(img *image.RGBA, face font.Face, x, y int, s string, c color.Color) {
	w, h := textWidth(face, s), lineHeight(face)
	flat := image.NewAlpha(image.Rect(0, 0, w, h))
	drawText(flat, face, 0, 0, s, color.Opaque)
	up := image.NewAlpha(image.Rect(0, 0, h, w))
	for py := range h {
		for px := range w {
			up.SetAlpha(py, w-1-px, flat.AlphaAt(px, py))
		}
	}
	draw.DrawMask(img, image.Rect(x, y, x+h, y+w), image.NewUniform(c), image.Point{}, up, image.Point{}, draw.Over)
}

// legendItem is one entry of the legend: a swatch and its name.
type legendItem struct {
	name   string
	swatch func(img *image.RGBA, r image.Rectangle)
}

// legend is the chart's legend: the history, the median and the band,
// those that the chart has.
func (c chart) legend() []legendItem {
	lineSwatch := func(col color.RGBA) func(*image.RGBA, image.Rectangle) {
		return func(img *image.RGBA, r image.Rectangle) {
			y := (r.Min.Y + r.Max.Y) / 2
			hline(img, r.Min.X, r.Max.X-1, y-1, col)
			hline(img, r.Min.X, r.Max.X-1, y, col)
		}
	}
	var items []legendItem
	if len(c.History) > 0 {
		items = append(items, legendItem{"history", lineSwatch(colHistory)})
	}
	if len(c.Median) > 0 {
		items = append(items, legendItem{"median (q0.5)", lineSwatch(colMedian)})
	}
	if len(c.Lower) > 0 && len(c.Upper) > 0 {
		items = append(items, legendItem{bandName(c.BandLow, c.BandHigh), func(img *image.RGBA, r image.Rectangle) {
			draw.Draw(img, r, image.NewUniform(colBand), image.Point{}, draw.Over)
		}})
	}
	return items
}

// bandName names the band by its quantile levels, e.g. "q0.1–q0.9 band (80%)".
func bandName(lo, hi float64) string {
	if !(lo > 0 && hi < 1 && lo < hi) {
		return "lower–upper band"
	}
	q := func(v float64) string { return "q" + strconv.FormatFloat(v, 'g', -1, 64) }
	return fmt.Sprintf("%s–%s band (%s%%)", q(lo), q(hi), strconv.FormatFloat(math.Round((hi-lo)*1000)/10, 'g', -1, 64))
}

// render draws the chart on a width x height white canvas: the title, the
// legend below it, the plot with its grid, tick labels and axis names.
func (c chart) render(width, height int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)
	nh, nf := len(c.History), len(c.Median)
	n := nh + nf
	if n == 0 {
		return img
	}
	titleFace, face := newFace(titleSize), newFace(labelSize)
	lh := lineHeight(face)
	xName, yName := orDefault(c.XName, "time step"), orDefault(c.YName, "value")

	// Vertical layout: title, legend, plot, x tick labels, x axis name.
	top := pad
	titleTop := top
	if c.Title != "" {
		top += lineHeight(titleFace) + 4
	}
	legendTop := top
	items := c.legend()
	top += lh + 12
	bottom := height - pad - lh - 6 - lh - 10 // x axis name, x tick labels

	// Vertical scale and its tick labels, which size the left margin.
	lo, hi := valueRange(c.History, c.Lower, c.Median, c.Upper)
	yTicks, yStep := yTickValues(lo, hi, bottom-top, lh)
	yLabels := make([]string, len(yTicks))
	labelW := 0
	for i, v := range yTicks {
		yLabels[i] = strconv.FormatFloat(v, 'f', decimals(yStep), 64)
		labelW = max(labelW, textWidth(face, yLabels[i]))
	}
	plot := image.Rect(pad+lh+8+labelW+8, top, width-24, bottom)
	if plot.Dx() < 2 || plot.Dy() < 2 {
		return img
	}
	xAt := func(i float64) float64 {
		if n == 1 {
			return float64(plot.Min.X+plot.Max.X) / 2
		}
		return float64(plot.Min.X) + i*float64(plot.Dx()-1)/float64(n-1)
	}
	yAt := func(v float64) float64 {
		return float64(plot.Max.Y-1) - (v-lo)/(hi-lo)*float64(plot.Dy()-1)
	}

	// Title, centred over the plot (within the canvas), and the legend.
	if c.Title != "" {
		tw := textWidth(titleFace, c.Title)
		tx := max(min((plot.Min.X+plot.Max.X-tw)/2, width-pad-tw), pad)
		drawText(img, titleFace, tx, titleTop, c.Title, colTitle)
	}
	x := plot.Min.X
	for _, it := range items {
		it.swatch(img, image.Rect(x, legendTop+lh/2-5, x+24, legendTop+lh/2+5))
		x += 24 + 6
		drawText(img, face, x, legendTop, it.name, colText)
		x += textWidth(face, it.name) + 20
	}

	// Grid, tick labels and axis names.
	for i, v := range yTicks {
		y := int(math.Round(yAt(v)))
		hline(img, plot.Min.X, plot.Max.X-1, y, colGrid)
		hline(img, plot.Min.X-5, plot.Min.X-1, y, colAxis)
		drawText(img, face, plot.Min.X-8-textWidth(face, yLabels[i]), y-lh/2, yLabels[i], colText)
	}
	ticks := layoutXTicks(n, func(i int) int { return int(math.Round(xAt(float64(i)))) }, c.xLabel,
		func(s string) int { return textWidth(face, s) }, 0, width, tickGap)
	for _, t := range ticks {
		vline(img, t.X, plot.Min.Y, plot.Max.Y-1, colGrid)
		vline(img, t.X, plot.Max.Y, plot.Max.Y+4, colAxis)
		drawText(img, face, t.Left, plot.Max.Y+10, t.Label, colText)
	}
	xw := textWidth(face, xName)
	drawText(img, face, max((plot.Min.X+plot.Max.X-xw)/2, 0), plot.Max.Y+10+lh+6, xName, colText)
	yw := textWidth(face, yName)
	drawTextUp(img, face, pad, max((plot.Min.Y+plot.Max.Y-yw)/2, 0), yName, colText)

	// The forecast is anchored at the last observation, if there is one, so
	// that the band and the median continue the history line.
	xs := make([]float64, 0, nf+1)
	fl, fm, fu := make([]float64, 0, nf+1), make([]float64, 0, nf+1), make([]float64, 0, nf+1)
	if nh > 0 && !math.IsNaN(c.History[nh-1]) && nf > 0 {
		last := c.History[nh-1]
		xs, fl, fm, fu = append(xs, xAt(float64(nh-1))), append(fl, last), append(fm, last), append(fu, last)
	}
	for i := range nf {
		xs = append(xs, xAt(float64(nh+i)))
		fl, fm, fu = append(fl, c.Lower[i]), append(fm, c.Median[i]), append(fu, c.Upper[i])
	}
	fillBand(img, xs, fl, fu, yAt)

	hx := make([]float64, nh)
	for i := range hx {
		hx[i] = xAt(float64(i))
	}
	polyline(img, hx, c.History, yAt, colHistory)
	polyline(img, xs, fm, yAt, colMedian)

	if nh > 0 && nf > 0 {
		x := int(math.Round(xAt(float64(nh - 1))))
		for y := plot.Min.Y; y < plot.Max.Y; y += 8 {
			vline(img, x, y, min(y+3, plot.Max.Y-1), colSeparator)
		}
	}
	hline(img, plot.Min.X, plot.Max.X-1, plot.Max.Y-1, colAxis)
	vline(img, plot.Min.X, plot.Min.Y, plot.Max.Y-1, colAxis)
	return img
}

// orDefault returns s, or def if s is blank.
func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// yTickValues returns round values within [lo, hi] (at most 6) whose rows,
// on a plot span pixels high, are at least twice the label height lh apart.
func yTickValues(lo, hi float64, span, lh int) ([]float64, float64) {
	for target := 6; ; target-- {
		ticks, step := niceTicks(lo, hi, target)
		if target <= 1 || len(ticks) < 2 || step/(hi-lo)*float64(span) >= float64(2*lh) {
			return ticks, step
		}
	}
}

// tick is one x-axis tick: the index of its point, its pixel column, and
// its label with the label's left and right pixel edges.
type tick struct {
	Index, X    int
	Label       string
	Left, Right int
}

// xSteps are the tick spacings tried, smallest first: calendar-friendly
// (months: 3, 6, 12, 24, ...) and round (5, 10, 20, 50, ...) numbers.
var xSteps = []int{1, 2, 3, 4, 5, 6, 10, 12, 20, 24, 25, 36, 48, 50, 60, 100, 120}

// layoutXTicks labels the points 0, k, 2k, ... below n with the smallest
// step k of xSteps (then 200, 500, 1000, ...; n at the last) whose labels,
// measured by width and centred on their points' columns xAt(i) but kept
// within [minX, maxX], leave at least gap pixels between neighbours.
func layoutXTicks(n int, xAt func(int) int, label func(int) string, width func(string) int, minX, maxX, gap int) []tick {
	if n <= 0 {
		return nil
	}
	place := func(k int) ([]tick, bool) {
		var ticks []tick
		for i := 0; i < n; i += k {
			s := label(i)
			x, w := xAt(i), width(s)
			left := max(min(x-w/2, maxX-w), minX)
			t := tick{Index: i, X: x, Label: s, Left: left, Right: left + w}
			if len(ticks) > 0 && ticks[len(ticks)-1].Right+gap > t.Left {
				return nil, false
			}
			ticks = append(ticks, t)
		}
		return ticks, true
	}
	steps := xSteps
	for s := 200; s < n; s *= 10 {
		steps = append(steps, s, s/2*5, s*5) // 200, 500, 1000, 2000, ...
	}
	for _, k := range steps {
		if k >= n {
			break
		}
		if ticks, ok := place(k); ok {
			return ticks
		}
	}
	ticks, _ := place(n) // the first point alone
	return ticks
}

// xLabel is the tick label of point i: its label (shortened to a date if
// long) or its index.
func (c chart) xLabel(i int) string {
	if i < len(c.Labels) && c.Labels[i] != "" {
		s := c.Labels[i]
		if len(s) > 10 {
			s = s[:10]
		}
		return s
	}
	return strconv.Itoa(i)
}

// writePNG encodes img as a PNG file at path.
func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// valueRange is the range of the finite values, padded by 5% each side.
func valueRange(series ...[]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	switch {
	case lo > hi: // no finite values
		return 0, 1
	case lo == hi:
		pad := max(math.Abs(lo)*0.1, 1)
		return lo - pad, hi + pad
	}
	pad := (hi - lo) * 0.05
	return lo - pad, hi + pad
}

// niceTicks returns about target round values (multiples of 1, 2 or 5
// times a power of ten) within [lo, hi], and their spacing.
func niceTicks(lo, hi float64, target int) ([]float64, float64) {
	raw := (hi - lo) / float64(max(target, 1))
	if !(raw > 0) || math.IsInf(raw, 0) {
		return []float64{lo}, 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		ticks = append(ticks, k*step+0) // +0 turns -0 into 0
	}
	return ticks, step
}

// decimals is the number of decimals needed to print multiples of step.
func decimals(step float64) int {
	if step <= 0 || step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

// fillBand blends colBand between the lower and upper curves, one pixel
// column at a time, interpolating linearly between the points xs.
func fillBand(img *image.RGBA, xs, lower, upper []float64, yAt func(float64) float64) {
	src := image.NewUniform(colBand)
	for j := 0; j+1 < len(xs); j++ {
		if anyNaN(lower[j], lower[j+1], upper[j], upper[j+1]) {
			continue
		}
		x0, x1 := int(math.Round(xs[j])), int(math.Round(xs[j+1]))
		last := x1 - 1
		if j+2 == len(xs) {
			last = x1 // the last segment includes its end column
		}
		for x := x0; x <= last; x++ {
			t := 0.0
			if x1 > x0 {
				t = float64(x-x0) / float64(x1-x0)
			}
			ya := yAt(lower[j] + t*(lower[j+1]-lower[j]))
			yb := yAt(upper[j] + t*(upper[j+1]-upper[j]))
			top, bot := int(math.Round(min(ya, yb))), int(math.Round(max(ya, yb)))
			draw.Draw(img, image.Rect(x, top, x+1, bot+1), src, image.Point{}, draw.Over)
		}
	}
}

// polyline draws a 2-pixel line through the finite points, leaving gaps at
// NaN values.
func polyline(img *image.RGBA, xs, vs []float64, yAt func(float64) float64, c color.RGBA) {
	for i := range xs {
		if math.IsNaN(vs[i]) {
			continue
		}
		x0, y0 := int(math.Round(xs[i])), int(math.Round(yAt(vs[i])))
		dot(img, x0, y0, c)
		if i+1 < len(xs) && !math.IsNaN(vs[i+1]) {
			line(img, x0, y0, int(math.Round(xs[i+1])), int(math.Round(yAt(vs[i+1]))), c)
		}
	}
}

// line draws from (x0, y0) to (x1, y1) with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		dot(img, x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	img.SetRGBA(x, y, c)
	img.SetRGBA(x+1, y, c)
	img.SetRGBA(x, y+1, c)
	img.SetRGBA(x+1, y+1, c)
}

func anyNaN(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) {
			return true
		}
	}
	return false
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

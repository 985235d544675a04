package main

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"
)

const (
	chartWidth  = 1000
	chartHeight = 500
	textScale   = 2 // the 5x7 font drawn at 10x14 pixels
)

var (
	colBackground = color.RGBA{255, 255, 255, 255}
	colGrid       = color.RGBA{232, 232, 232, 255}
	colAxis       = color.RGBA{80, 80, 80, 255}
	colText       = color.RGBA{60, 60, 60, 255}
	colHistory    = color.RGBA{30, 30, 30, 255}
	colMedian     = color.RGBA{31, 119, 180, 255}
	colBand       = color.NRGBA{31, 119, 180, 70} // translucent, blended over the grid
	colSeparator  = color.RGBA{150, 150, 150, 255}
)

// chart is a fan chart: an observed history followed by a forecast with
// its median and a lower/upper band.
type chart struct {
	Labels               []string  // x labels: one per history point, then one per forecast step
	History              []float64 // observed values; NaN = missing
	Lower, Median, Upper []float64 // forecast, one value per step
}

// render draws the chart on a width x height white canvas.
func (c chart) render(width, height int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), image.NewUniform(colBackground), image.Point{}, draw.Src)
	nh, nf := len(c.History), len(c.Median)
	n := nh + nf
	if n == 0 {
		return img
	}

	// Vertical scale and its tick labels, which size the left margin.
	lo, hi := valueRange(c.History, c.Lower, c.Median, c.Upper)
	yTicks, yStep := niceTicks(lo, hi, 6)
	yLabels := make([]string, len(yTicks))
	labelW := 0
	for i, v := range yTicks {
		yLabels[i] = strconv.FormatFloat(v, 'f', decimals(yStep), 64)
		labelW = max(labelW, textWidth(yLabels[i]))
	}
	plot := image.Rect(labelW+16, 20, width-24, height-36)
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

	// Grid and tick labels.
	for i, v := range yTicks {
		y := int(math.Round(yAt(v)))
		hline(img, plot.Min.X, plot.Max.X-1, y, colGrid)
		hline(img, plot.Min.X-5, plot.Min.X-1, y, colAxis)
		drawText(img, plot.Min.X-8-textWidth(yLabels[i]), y-7*textScale/2, yLabels[i], colText)
	}
	maxLabel := 1
	for i := range n {
		maxLabel = max(maxLabel, textWidth(c.xLabel(i)))
	}
	for _, i := range xTicks(n, max(1, plot.Dx()/(maxLabel+24))) {
		x := int(math.Round(xAt(float64(i))))
		vline(img, x, plot.Min.Y, plot.Max.Y-1, colGrid)
		vline(img, x, plot.Max.Y, plot.Max.Y+4, colAxis)
		s := c.xLabel(i)
		tx := min(max(x-textWidth(s)/2, 0), width-textWidth(s))
		drawText(img, tx, plot.Max.Y+10, s, colText)
	}

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

// xTicks picks indices 0, k, 2k, ... below n with at most maxTicks of them
// and k a round number of steps (2, 3, 4, 6, 12, 24, ...).
func xTicks(n, maxTicks int) []int {
	k := (n + maxTicks - 1) / maxTicks
	for _, s := range []int{1, 2, 3, 4, 6, 12, 24, 36, 48, 60, 120} {
		if s >= k {
			k = s
			break
		}
	}
	var ticks []int
	for i := 0; i < n; i += k {
		ticks = append(ticks, i)
	}
	return ticks
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

// font is a 5x7 bitmap font for tick labels: each row's low 5 bits, most
// significant bit leftmost. Other characters are drawn as blanks.
var font = map[rune][7]uint8{
	'0': {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E},
	'1': {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},
	'2': {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F},
	'3': {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},
	'4': {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02},
	'5': {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},
	'6': {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E},
	'7': {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
	'8': {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E},
	'9': {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},
	'-': {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00},
	'+': {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00},
	'.': {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C},
	':': {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00},
	'/': {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10},
	't': {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06},
	'T': {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},
}

// textWidth is the width in pixels of s drawn by drawText.
func textWidth(s string) int {
	n := len([]rune(s))
	if n == 0 {
		return 0
	}
	return (6*n - 1) * textScale
}

// drawText draws s with its top-left corner at (x, y).
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		for row, bits := range font[r] {
			for col := range 5 {
				if bits&(0x10>>col) == 0 {
					continue
				}
				for py := y + row*textScale; py < y+(row+1)*textScale; py++ {
					hline(img, x+col*textScale, x+(col+1)*textScale-1, py, c)
				}
			}
		}
		x += 6 * textScale
	}
}

package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"math"
	"testing"
)

// fanChart is a monthly history of 144 points (as in airpassengers.csv)
// followed by a forecast of horizon steps.
func fanChart(horizon int) chart {
	c := chart{Title: fmt.Sprintf("airpassengers: %d-step forecast by model default", horizon), BandLow: 0.1, BandHigh: 0.9}
	for i := range 144 {
		c.Labels = append(c.Labels, fmt.Sprintf("%d-%02d", 1949+i/12, i%12+1))
		c.History = append(c.History, 100+2*float64(i)+30*math.Sin(float64(i)/2))
	}
	for i := range horizon {
		m := 400 + 2*float64(i) + 30*math.Sin(float64(i)/2)
		c.Labels = append(c.Labels, fmt.Sprintf("%d-%02d", 1961+i/12, i%12+1))
		c.Median, c.Lower, c.Upper = append(c.Median, m), append(c.Lower, m-20), append(c.Upper, m+20)
	}
	return c
}

// inked counts the pixels of img in r that are not the background.
func inked(img *image.RGBA, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if img.RGBAAt(x, y) != colBackground {
				n++
			}
		}
	}
	return n
}

func TestRenderTitleLegendAxisNames(t *testing.T) {
	face := newFace(labelSize)
	lh, th := lineHeight(face), lineHeight(newFace(titleSize))
	titleBand := image.Rect(0, pad, chartWidth, pad+th)
	legendBand := image.Rect(0, pad+th+4, chartWidth, pad+th+4+lh)
	xNameBand := image.Rect(0, chartHeight-pad-lh, chartWidth, chartHeight)
	yNameBand := image.Rect(0, 0, pad+lh, chartHeight)

	img := fanChart(24).render(chartWidth, chartHeight)
	for _, b := range []struct {
		name string
		r    image.Rectangle
		min  int
	}{{"title", titleBand, 300}, {"legend", legendBand, 300}, {"x axis name", xNameBand, 60}, {"y axis name", yNameBand, 40}} {
		if got := inked(img, b.r); got < b.min {
			t.Errorf("%s band %v: %d inked pixels, want >= %d", b.name, b.r, got, b.min)
		}
	}
	// The legend's swatches: the median's colour and the band's blend appear in the legend row.
	var median, band bool
	for y := legendBand.Min.Y; y < legendBand.Max.Y; y++ {
		for x := legendBand.Min.X; x < legendBand.Max.X; x++ {
			p := img.RGBAAt(x, y)
			median = median || p == colMedian
			band = band || (p.B > p.R && p.B > 200 && p != colMedian)
		}
	}
	if !median || !band {
		t.Errorf("legend row: median swatch %v, band swatch %v", median, band)
	}

	// Without a title the title band stays empty; the legend moves up.
	c := fanChart(24)
	c.Title = ""
	if got := inked(c.render(chartWidth, chartHeight), image.Rect(0, 0, chartWidth, pad)); got != 0 {
		t.Errorf("untitled chart: %d inked pixels above the legend", got)
	}
}

func TestBandName(t *testing.T) {
	for _, tt := range []struct {
		lo, hi float64
		want   string
	}{
		{0.1, 0.9, "q0.1–q0.9 band (80%)"},
		{0.05, 0.95, "q0.05–q0.95 band (90%)"},
		{0.25, 0.75, "q0.25–q0.75 band (50%)"},
		{0, 0, "lower–upper band"},
		{0.9, 0.1, "lower–upper band"},
	} {
		if got := bandName(tt.lo, tt.hi); got != tt.want {
			t.Errorf("bandName(%v, %v) = %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

// TestLayoutXTicksNoOverlap lays out the x ticks as render does, at long
// horizons, for date and index labels, and checks that no two labels
// overlap, that all lie on the canvas, and that the axis is not left bare.
func TestLayoutXTicksNoOverlap(t *testing.T) {
	face := newFace(labelSize)
	width := func(s string) int { return textWidth(face, s) }
	for _, horizon := range []int{12, 64, 500} {
		for _, dates := range []bool{true, false} {
			c := fanChart(horizon)
			if !dates {
				c.Labels = nil // index labels 0 .. n-1
			}
			n := len(c.History) + len(c.Median)
			for _, plotW := range []int{900, 400} {
				t.Run(fmt.Sprintf("h%d/dates=%v/w%d", horizon, dates, plotW), func(t *testing.T) {
					x0 := 50
					xAt := func(i int) int { return x0 + int(math.Round(float64(i)*float64(plotW-1)/float64(n-1))) }
					ticks := layoutXTicks(n, xAt, c.xLabel, width, 0, x0+plotW+24, tickGap)
					if len(ticks) < 3 {
						t.Fatalf("%d ticks, want at least 3", len(ticks))
					}
					step := ticks[1].Index - ticks[0].Index
					for i, tk := range ticks {
						if tk.Index != i*step || tk.Label != c.xLabel(tk.Index) || tk.X != xAt(tk.Index) {
							t.Errorf("tick %d = %+v, want index %d", i, tk, i*step)
						}
						if got := width(tk.Label); tk.Right-tk.Left != got {
							t.Errorf("tick %d: extent %d, label measures %d", i, tk.Right-tk.Left, got)
						}
						if tk.Left < 0 || tk.Right > x0+plotW+24 {
							t.Errorf("tick %d (%q) at [%d, %d] leaves the canvas", i, tk.Label, tk.Left, tk.Right)
						}
						if i > 0 && ticks[i-1].Right+tickGap > tk.Left {
							t.Errorf("ticks %q [%d, %d] and %q [%d, %d] closer than %d px",
								ticks[i-1].Label, ticks[i-1].Left, ticks[i-1].Right, tk.Label, tk.Left, tk.Right, tickGap)
						}
					}
					// The step is the smallest that fits: the next smaller one would collide.
					if idx := indexOf(xSteps, step); idx > 0 {
						smaller := xSteps[idx-1]
						k := 0
						for ; k+smaller < n; k += smaller {
							a, b := c.xLabel(k), c.xLabel(k+smaller)
							ra := min(xAt(k)-width(a)/2, x0+plotW+24-width(a)) + width(a)
							lb := max(min(xAt(k+smaller)-width(b)/2, x0+plotW+24-width(b)), 0)
							if ra+tickGap > lb {
								break
							}
						}
						if k+smaller >= n {
							t.Errorf("step %d chosen, but %d fits", step, smaller)
						}
					}
				})
			}
		}
	}
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestLayoutXTicksEdges(t *testing.T) {
	w := func(s string) int { return 10 * len(s) }
	if got := layoutXTicks(0, nil, nil, w, 0, 100, 4); got != nil {
		t.Errorf("n=0: %v", got)
	}
	one := layoutXTicks(1, func(int) int { return 50 }, func(int) string { return "abc" }, w, 0, 100, 4)
	if len(one) != 1 || one[0].Left != 35 || one[0].Right != 65 {
		t.Errorf("n=1: %+v", one)
	}
	// Labels wider than the canvas's share of each point: only the first is drawn.
	wide := layoutXTicks(5000, func(i int) int { return i / 100 }, func(int) string { return "0123456789" }, w, 0, 60, 4)
	if len(wide) != 1 || wide[0].Left != 0 {
		t.Errorf("crowded: %+v", wide)
	}
	// A label at the right edge is pulled back onto the canvas.
	edge := layoutXTicks(2, func(i int) int { return 100 * i }, func(int) string { return "abcd" }, w, 0, 100, 4)
	if len(edge) != 2 || edge[1].Right != 100 || edge[0].Left != 0 {
		t.Errorf("edges: %+v", edge)
	}
}

func TestRenderDeterministic(t *testing.T) {
	encode := func(c chart) []byte {
		var buf bytes.Buffer
		if err := png.Encode(&buf, c.render(chartWidth, chartHeight)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, h := range []int{12, 500} {
		a, b := encode(fanChart(h)), encode(fanChart(h))
		if !bytes.Equal(a, b) {
			t.Errorf("horizon %d: two renders of the same chart differ", h)
		}
	}
	if bytes.Equal(encode(fanChart(12)), encode(fanChart(13))) {
		t.Errorf("different charts encode the same")
	}
	// Concurrent renders (each with its own faces) agree too.
	want := encode(fanChart(64))
	done := make(chan []byte)
	for range 4 {
		go func() {
			var buf bytes.Buffer
			png.Encode(&buf, fanChart(64).render(chartWidth, chartHeight))
			done <- buf.Bytes()
		}()
	}
	for range 4 {
		if got := <-done; !bytes.Equal(got, want) {
			t.Errorf("a concurrent render differs")
		}
	}
}

func TestYTickValuesSpacing(t *testing.T) {
	for _, span := range []int{20, 60, 150, 400} {
		ticks, step := yTickValues(0, 1000, span, 16)
		// Rows closer than twice the label height only when no fewer ticks exist (0 and 1000).
		if gap := step / 1000 * float64(span); len(ticks) >= 2 && gap < 32 && len(ticks) != 2 {
			t.Errorf("span %d: %d ticks %v px apart", span, len(ticks), gap)
		}
	}
}

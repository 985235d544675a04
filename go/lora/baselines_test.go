package lora

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFindWord(t *testing.T) {
	tests := []struct {
		s, w string
		want int
	}{
		{"pixel art of a cat", "pixel", 0},
		{"pixelated cat", "pixel", -1},
		{"a pixelated pixel cat", "pixel", 12},
		{"3d-printed toy", "3d", 0},
		{"a 3dfx card", "3d", -1},
		{"wet on wet technique", "wet on wet", 0},
		{"an 8-bit hero", "8-bit", 3},
		{"a photograph", "photo", -1},
		{"(photo)", "photo", 1},
		{"café photo", "photo", 6},
		{"éphoto", "photo", -1},
		{"", "x", -1},
		{"x", "", -1},
	}
	for _, tc := range tests {
		if got := findWord(tc.s, tc.w); got != tc.want {
			t.Errorf("findWord(%q, %q) = %d, want %d", tc.s, tc.w, got, tc.want)
		}
	}
}

func TestKeywordRouter(t *testing.T) {
	cat, err := LoadCatalog(filepath.Join("catalogs", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	k := NewKeywordRouter(cat)
	tests := []struct {
		prompt, name string
		score        float64
	}{
		{"An ANIME girl", "anime", 1},
		{"a dragon and a wizard", "fantasy", 2},
		{"pixel art of a cyberpunk street at night", "pixel_art", 1}, // tie: the earlier match wins
		{"a cyberpunk street in pixel art", "cyberpunk", 1},
		{"two dogs playing in a park", "", 0},
		{"pixelated photograph", "", 0}, // word boundaries
	}
	for _, tc := range tests {
		name, score := k.Best(tc.prompt)
		if name != tc.name || score != tc.score {
			t.Errorf("%q: %q %v, want %q %v", tc.prompt, name, score, tc.name, tc.score)
		}
	}
}

func TestTokenize(t *testing.T) {
	got := Tokenize("A Knight's armour, in 8-bit/16-bit & the Café-style!")
	want := []string{"knight", "armour", "bit", "16", "bit", "café", "style"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestBM25(t *testing.T) {
	cat := &Catalog{Entries: []Entry{
		{Name: "a", Positive: "red dragon red castle"},
		{Name: "b", Positive: "blue robot"},
		{Name: "c", Positive: "green dragon over a blue sea"},
	}}
	m := NewBM25(cat, 1.2, 0.75)
	// Documents: a = [red dragon red castle] (4), b = [blue robot] (2), c = [green dragon blue sea] (4).
	avgdl := 10.0 / 3
	idf := func(df float64) float64 { return math.Log(1 + (3-df+0.5)/(df+0.5)) }
	term := func(tf, dl, df float64) float64 {
		return idf(df) * tf * 2.2 / (tf + 1.2*(1-0.75+0.75*dl/avgdl))
	}
	got := m.Scores("the red dragon, red!")
	want := []float64{term(2, 4, 1) + term(1, 4, 2), 0, term(1, 4, 2)}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("scores %v, want %v", got, want)
		}
	}
	if name, score := m.Best("red dragon"); name != "a" || score <= 0 {
		t.Fatalf("best %q %v", name, score)
	}
	if name, score := m.Best("nothing matches"); name != "a" || score != 0 { // all zero: first name
		t.Fatalf("no match: %q %v", name, score)
	}
}

package lora

import (
	"fmt"
	"sync"
	"testing"
)

func TestVectorCache(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		puts     []string
		gets     map[string]bool // text -> found
	}{
		{"keeps what fits", 3, []string{"a", "b", "c"}, map[string]bool{"a": true, "b": true, "c": true, "d": false}},
		{"evicts the least recently put", 2, []string{"a", "b", "c"}, map[string]bool{"a": false, "b": true, "c": true}},
		{"a second put refreshes", 2, []string{"a", "b", "a", "c"}, map[string]bool{"a": true, "b": false, "c": true}},
		{"capacity 0 keeps nothing", 0, []string{"a"}, map[string]bool{"a": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewVectorCache(tc.capacity)
			for i, text := range tc.puts {
				c.Put(text, []float32{float32(i), float32(len(text))})
			}
			hits, misses := 0, 0
			for text, want := range tc.gets {
				v, ok := c.Get(text)
				if ok != want {
					t.Fatalf("Get(%q): found %v, want %v", text, ok, want)
				}
				if ok {
					hits++
					want := -1
					for i, p := range tc.puts {
						if p == text {
							want = i
						}
					}
					if v[0] != float32(want) {
						t.Fatalf("Get(%q) = %v, want the last put (%d)", text, v, want)
					}
				} else {
					misses++
				}
			}
			if h, m := c.Stats(); h != uint64(hits) || m != uint64(misses) {
				t.Fatalf("stats %d hits %d misses, want %d %d", h, m, hits, misses)
			}
		})
	}
}

// Vectors are copies both ways; an access makes an entry the most recent one.
func TestVectorCacheCopiesAndRecency(t *testing.T) {
	c := NewVectorCache(2)
	in := []float32{1, 2}
	c.Put("a", in)
	in[0] = 9
	got, _ := c.Get("a")
	got[1] = 9
	if again, _ := c.Get("a"); again[0] != 1 || again[1] != 2 {
		t.Fatalf("the cached vector changed: %v", again)
	}
	c.Put("b", []float32{3})
	c.Get("a") // a is now the most recent: c evicts b
	c.Put("c", []float32{4})
	if _, ok := c.Get("b"); ok {
		t.Fatal("b survived, a was evicted")
	}
	if _, ok := c.Get("a"); !ok {
		t.Fatal("a was evicted after its use")
	}
}

func TestVectorCacheConcurrent(t *testing.T) {
	c := NewVectorCache(16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				text := fmt.Sprint((g + i) % 32)
				if v, ok := c.Get(text); ok && v[0] != float32(len(text)) {
					t.Errorf("Get(%q) = %v", text, v)
				}
				c.Put(text, []float32{float32(len(text))})
			}
		}()
	}
	wg.Wait()
	if c.Len() > 16 {
		t.Fatalf("%d entries in a cache of 16", c.Len())
	}
}

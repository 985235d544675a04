package lora

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// VectorCache keeps the embeddings of the texts seen most recently, so that a prompt routed again (a seed sweep, a
// retried request, n images of one prompt) is not embedded again: at most its capacity of entries, the least
// recently used evicted first, safe for concurrent use. Vectors are copied in and out: callers may keep or change
// theirs. A text is at most MaxPromptBytes long where the server uses it, so the cache's memory is bounded by
// capacity x (MaxPromptBytes + the vector's bytes).
type VectorCache struct {
	mu           sync.Mutex
	capacity     int
	order        *list.List // front: the most recently used; values *cached
	byText       map[string]*list.Element
	hits, misses atomic.Uint64
}

type cached struct {
	text string
	vec  []float32
}

// NewVectorCache makes a cache of at most capacity entries (capacity <= 0: one that keeps nothing).
func NewVectorCache(capacity int) *VectorCache {
	return &VectorCache{capacity: max(capacity, 0), order: list.New(), byText: map[string]*list.Element{}}
}

// Get returns a copy of text's vector and true, or nil and false (counted as a hit or a miss).
func (c *VectorCache) Get(text string) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byText[text]
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	c.order.MoveToFront(el)
	return append([]float32(nil), el.Value.(*cached).vec...), true
}

// Put stores a copy of vec as text's vector (replacing any), evicting the least recently used entry when full.
func (c *VectorCache) Put(text string, vec []float32) {
	if c.capacity == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byText[text]; ok {
		el.Value.(*cached).vec = append([]float32(nil), vec...)
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.capacity {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.byText, old.Value.(*cached).text)
	}
	c.byText[text] = c.order.PushFront(&cached{text: text, vec: append([]float32(nil), vec...)})
}

// Len is the number of entries held.
func (c *VectorCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Stats returns the hits and misses of Get so far.
func (c *VectorCache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }

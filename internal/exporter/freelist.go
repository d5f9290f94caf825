package exporter

// freeList keeps a few recently used values alive between scrapes.
//
// sync.Pool empties itself at every garbage collection, so a scrape's large
// buffers (hundreds of KiB for eight GPUs, over a MiB for 64) were regrown
// after each GC cycle: that churn was most of the exporter's allocation and
// pushed its peak RSS up. A small fixed list survives GC; scrapes beyond its
// size simply allocate, as they would with a pool.
// retainedBuffers is how many scrape buffers stay allocated between scrapes:
// enough for Prometheus HA pairs scraping at once, small enough that the
// idle footprint stays a few hundred KiB per GPU-octet.
const retainedBuffers = 2

type freeList[T any] struct {
	items   chan T
	newItem func() T
}

func newFreeList[T any](size int, newItem func() T) *freeList[T] {
	return &freeList[T]{items: make(chan T, size), newItem: newItem}
}

func (f *freeList[T]) get() T {
	select {
	case v := <-f.items:
		return v
	default:
		return f.newItem()
	}
}

func (f *freeList[T]) put(v T) {
	select {
	case f.items <- v:
	default: // full: let the garbage collector have it
	}
}

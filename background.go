package pilot

// background is work done in a goroutine of its own while the dispatch
// goes on: wait blocks until it is done and returns its outcome, as often
// as it is asked, from any goroutine. A nil *background is done, with the
// zero outcome.
type background[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// inBackground starts f.
func inBackground[T any](f func() (T, error)) *background[T] {
	b := &background[T]{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.val, b.err = f()
	}()
	return b
}

func (b *background[T]) wait() (T, error) {
	if b == nil {
		var zero T
		return zero, nil
	}
	<-b.done
	return b.val, b.err
}

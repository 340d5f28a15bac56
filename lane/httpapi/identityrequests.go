package httpapi

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/sema-agent/sema/api"
)

// identityRequests bounds the requests one identity has in their handlers
// at once, so that no caller can hold every connection of the HTTP cap
// (a stream per instruction queued on its own device costs it nothing
// else) and keep the other callers, and the devices dialling in, out.
// LimitHTTP sets the bound; without it there is none.
type identityRequests struct {
	mu   sync.Mutex
	max  int // 0: no bound
	open map[string]int
}

func (q *identityRequests) setMax(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.max = n
}

// enter counts a request of identity in, or reports false, counting
// nothing, when it already has the most it may.
func (q *identityRequests) enter(identity string) (bound int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.max > 0 && q.open[identity] >= q.max {
		return q.max, false
	}
	if q.open == nil {
		q.open = map[string]int{}
	}
	q.open[identity]++
	return q.max, true
}

func (q *identityRequests) leave(identity string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open[identity]--; q.open[identity] <= 0 {
		delete(q.open, identity)
	}
}

// maxDiscardedBody is the most of a refused request's body that is read
// and thrown away so that its client reads the answer rather than a reset.
const maxDiscardedBody = 1 << 20

// tooManyRequests answers 503 service.busy for a request over its
// identity's bound, and closes the connection after it. Like the content
// budget's 503, it reads a small body (at the pace every body must keep)
// so that a client already sending it sees the answer.
func (s *API) tooManyRequests(w http.ResponseWriter, r *http.Request, bound int) {
	e := errorf(http.StatusServiceUnavailable, api.CodeBusy, "you have %d requests open on this lane at once, the most one identity may; retry after %d s", bound, int(busyRetryAfter.Seconds()))
	e.retryAfter = busyRetryAfter
	w.Header().Set("Connection", "close")
	writeError(w, e)
	http.NewResponseController(w).Flush()
	if n := r.ContentLength; n > 0 && n <= maxDiscardedBody && !strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		io.CopyN(io.Discard, s.pacedBody(w, r, n), n)
	}
}

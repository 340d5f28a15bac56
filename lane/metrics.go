package lane

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/protocol"
)

// This file is the lane's metrics: a few counters fed by two hooks (every
// settlement, every audit row) and gauges read from the device books at
// scrape time. Labels come from closed sets only (states, outcome kinds,
// error codes, reject and frame reasons, audit event names): never a device
// id, a path or anything a caller typed, so cardinality stays bounded and
// nothing secret can leak into a scrape.

// metrics holds the lane's counters. The zero value is ready to use; its
// lock is a leaf (taken under a device's lock, never around one).
type metrics struct {
	mu         sync.Mutex
	dispatches map[[2]string]uint64 // {state, outcome} → settled calls
	audited    map[[2]string]uint64 // {event, reason} → audit rows

	deliveryOverflows atomic.Uint64 // commands the lane cancelled for the delivery bound
}

// settled counts one settlement (the hook in settle).
func (m *metrics) settled(state protocol.InstructionState, o protocol.Outcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dispatches == nil {
		m.dispatches = map[[2]string]uint64{}
	}
	m.dispatches[[2]string{string(state), outcomeLabel(o)}]++
}

// audit counts one audit row (the hook in Server.audit).
func (m *metrics) audit(e store.AuditEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.audited == nil {
		m.audited = map[[2]string]uint64{}
	}
	m.audited[[2]string{e.Event, e.Reason}]++
}

// outcomeLabel is the outcome kind of a success arm, or the errorCode of a
// failure: two disjoint closed sets.
func outcomeLabel(o protocol.Outcome) string {
	switch o := o.(type) {
	case nil:
		return "none"
	case protocol.Failure:
		return string(o.ErrorCode)
	default:
		return string(o.Kind())
	}
}

// refusals maps the audit events that record a refusal to the metric's
// "what" label.
var refusals = map[EventName]string{
	EventHelloRejected:    "hello",
	EventFrameRejected:    "frame",
	EventUpgradeRefused:   "upgrade",
	EventHandshakeTimeout: "handshake",
	EventOutcomeRefused:   "outcome",
	EventEnrollRefused:    "enroll",
	EventRateLimited:      "enroll_rate",
}

// isRefusal reports whether event records a refusal: the audit writer
// merges identical ones into one row with a count (audit.Window).
func isRefusal(event string) bool {
	_, ok := refusals[EventName(event)]
	return ok
}

// Count is one labelled counter value of a Metrics snapshot.
type Count struct {
	Labels [2]string // the two label values, in the order the field documents
	Value  uint64
}

// Metrics is a snapshot of the lane's counters and gauges.
type Metrics struct {
	ConnectedDevices int  // devices with a live connection on this replica
	Inflight         int  // instructions committed to a device and not settled
	Queued           int  // instructions waiting for an in-flight slot
	PreAuthSockets   int  // sockets that have not finished the handshake
	Draining         bool // Shutdown has begun

	// AuditRowsDropped counts audit rows lost (queue full, a failed
	// write); each loss is also told by an audit.rows_dropped row.
	AuditRowsDropped uint64
	// HistoryRowsDropped counts instruction history rows lost: the
	// registry refused writes until the queue was full, or at shutdown.
	HistoryRowsDropped uint64
	// The HTTP API's own (package httpapi fills them in its snapshot).
	HTTPConns        int64  // open HTTP connections that are not WebSockets
	HTTPConnsRefused uint64 // connections closed at once at the connection cap
	HTTPConnsEvicted uint64 // idle keep-alive connections closed to make room at the cap
	BufferedContent  int64  // bytes of the buffered-content budget reserved now
	ContentBusy      uint64 // instruction requests refused 503 service.busy
	// DeliveryOverflows counts commands the lane cancelled because their
	// output outran the pending-delivery bound (§4).
	DeliveryOverflows uint64
	// Forwarded counts device requests (instructions, streamed writes)
	// this replica forwarded to the replica holding the device (httpapi).
	Forwarded uint64

	Dispatches []Count // {state, outcome}: settled instructions
	Refusals   []Count // {what, reason}: hellos, frames, upgrades, enrollments refused
	Events     []Count // {event, reason}: every other audit row
}

// Metrics returns a snapshot of the lane's counters and gauges.
func (s *Server) Metrics() Metrics {
	var m Metrics
	s.mu.Lock()
	devices := make([]*deviceState, 0, len(s.devices))
	for _, d := range s.devices {
		devices = append(devices, d)
	}
	m.PreAuthSockets, m.Draining = s.preAuth, s.draining
	s.mu.Unlock()
	m.AuditRowsDropped = s.audits.Dropped()
	m.HistoryRowsDropped = s.history.droppedTotal.Load()
	m.DeliveryOverflows = s.metrics.deliveryOverflows.Load()
	for _, d := range devices {
		d.mu.Lock()
		if c := d.conn; c != nil && c.state().online() {
			m.ConnectedDevices++
		}
		m.Inflight += len(d.calls)
		m.Queued += len(d.queue)
		d.mu.Unlock()
	}
	s.metrics.mu.Lock()
	for k, v := range s.metrics.dispatches {
		m.Dispatches = append(m.Dispatches, Count{Labels: k, Value: v})
	}
	for k, v := range s.metrics.audited {
		if what, ok := refusals[EventName(k[0])]; ok {
			m.Refusals = append(m.Refusals, Count{Labels: [2]string{what, k[1]}, Value: v})
		} else {
			m.Events = append(m.Events, Count{Labels: k, Value: v})
		}
	}
	s.metrics.mu.Unlock()
	for _, cs := range [][]Count{m.Dispatches, m.Refusals, m.Events} {
		slices.SortFunc(cs, func(a, b Count) int {
			return cmp.Or(strings.Compare(a.Labels[0], b.Labels[0]), strings.Compare(a.Labels[1], b.Labels[1]))
		})
	}
	return m
}

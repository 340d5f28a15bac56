package lane

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net/http"
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

	// The HTTP limits (httplimits.go, instruction_body.go), lock-free.
	httpOpen    atomic.Int64  // open non-WebSocket HTTP connections
	httpRefused atomic.Uint64 // connections closed at the cap
	contentBusy atomic.Uint64 // instruction requests answered 503 service.busy

	deliveryOverflows atomic.Uint64 // commands the lane cancelled for the delivery bound
	forwarded         atomic.Uint64 // device requests forwarded to the replica holding the device
}

func (m *metrics) httpConnsOpen(delta int64) { m.httpOpen.Add(delta) }
func (m *metrics) httpConnRefused()          { m.httpRefused.Add(1) }

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
var refusals = map[string]string{
	"device.hello_rejected":    "hello",
	"device.frame_rejected":    "frame",
	"device.upgrade_refused":   "upgrade",
	"device.handshake_timeout": "handshake",
	"device.outcome_refused":   "outcome",
	eventEnrollRefused:         "enroll",
	eventRateLimited:           "enroll_rate",
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
	HTTPConns        int64  // open HTTP connections that are not WebSockets (LimitHTTP)
	HTTPConnsRefused uint64 // connections closed at once at the HTTPLimits.MaxConns cap
	BufferedContent  int64  // bytes of the buffered-content budget reserved now
	ContentBusy      uint64 // instruction requests refused 503 service.busy
	// DeliveryOverflows counts commands the lane cancelled because their
	// output outran the pending-delivery bound (§4).
	DeliveryOverflows uint64
	// Forwarded counts device requests (instructions, streamed writes)
	// this replica forwarded to the replica holding the device (issue L).
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
	m.AuditRowsDropped = s.audits.droppedTotal.Load()
	m.HTTPConns, m.HTTPConnsRefused = s.metrics.httpOpen.Load(), s.metrics.httpRefused.Load()
	m.BufferedContent, m.ContentBusy = s.budget.inUse(), s.metrics.contentBusy.Load()
	m.DeliveryOverflows = s.metrics.deliveryOverflows.Load()
	m.Forwarded = s.metrics.forwarded.Load()
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
		if what, ok := refusals[k[0]]; ok {
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

// MetricsContentType is the Prometheus text exposition format.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteMetrics writes the snapshot in the Prometheus text exposition format.
func (s *Server) WriteMetrics(w io.Writer) error {
	m := s.Metrics()
	b := bufio.NewWriter(w)
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	counter := func(name, help, l0, l1 string, cs []Count) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for _, c := range cs {
			fmt.Fprintf(b, "%s{%s=\"%s\",%s=\"%s\"} %d\n", name, l0, labelValue(c.Labels[0]), l1, labelValue(c.Labels[1]), c.Value)
		}
	}
	draining := 0
	if m.Draining {
		draining = 1
	}
	plain := func(name, help string, v uint64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge("sema_lane_connected_devices", "Devices with a live connection on this replica.", int64(m.ConnectedDevices))
	gauge("sema_lane_inflight_instructions", "Instructions committed to a device and not yet settled.", int64(m.Inflight))
	gauge("sema_lane_queued_instructions", "Instructions waiting for an in-flight slot.", int64(m.Queued))
	gauge("sema_lane_preauth_sockets", "WebSockets that have not finished the handshake.", int64(m.PreAuthSockets))
	gauge("sema_lane_draining", "1 once the replica is shutting down.", int64(draining))
	gauge("sema_lane_http_connections", "Open HTTP connections that are not WebSockets.", m.HTTPConns)
	plain("sema_lane_http_connections_refused_total", "HTTP connections closed at once at the connection cap.", m.HTTPConnsRefused)
	gauge("sema_lane_buffered_content_bytes", "Bytes of instruction bodies and write content held in memory now (reserved).", m.BufferedContent)
	plain("sema_lane_content_busy_total", "Instruction requests refused 503 service.busy: the buffered-content budget was full.", m.ContentBusy)
	plain("sema_lane_forwarded_total", "Device requests forwarded to the lane replica holding the device's connection.", m.Forwarded)
	plain("sema_lane_delivery_overflows_total", "Commands the lane cancelled because their output outran the pending-delivery bound (a device sending past its acknowledgements).", m.DeliveryOverflows)
	counter("sema_lane_dispatches_total", "Settled instructions by state and outcome (the outcome kind, or the errorCode of a failure).",
		"state", "outcome", m.Dispatches)
	counter("sema_lane_refusals_total", "Refusals by what was refused (hello, frame, upgrade, handshake, outcome, enroll, enroll_rate) and reason code.",
		"what", "reason", m.Refusals)
	counter("sema_lane_events_total", "Other audit events by event and reason.", "event", "reason", m.Events)
	fmt.Fprintf(b, "# HELP %[1]s Audit rows lost (queue full, a failed write); each loss is also an audit.rows_dropped row.\n# TYPE %[1]s counter\n%[1]s %[2]d\n",
		"sema_lane_audit_rows_dropped_total", m.AuditRowsDropped)
	return b.Flush()
}

// MetricsHandler serves WriteMetrics. It reveals counts only, never an id
// or a secret; mount it where the operator's scraper can reach it.
func (s *Server) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", MetricsContentType)
		w.Header().Set("Cache-Control", "no-store")
		s.WriteMetrics(w)
	})
}

// labelValue escapes a label value (backslash, quote, newline) and clips it.
func labelValue(v string) string {
	if len(v) > 64 {
		v = v[:64]
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

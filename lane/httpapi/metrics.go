package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/sema-agent/sema/lane"
)

// httpMetrics are the HTTP API's own counters, lock-free; Metrics adds
// them to the core's snapshot.
type httpMetrics struct {
	httpOpen    atomic.Int64  // open non-WebSocket HTTP connections
	httpRefused atomic.Uint64 // connections closed at the cap
	httpEvicted atomic.Uint64 // idle or waiting connections closed to make room at the cap
	contentBusy atomic.Uint64 // instruction requests answered 503 service.busy
	forwarded   atomic.Uint64 // device requests forwarded to the replica holding the device
}

func (m *httpMetrics) httpConnsOpen(delta int64) { m.httpOpen.Add(delta) }
func (m *httpMetrics) httpConnRefused()          { m.httpRefused.Add(1) }
func (m *httpMetrics) httpConnEvicted()          { m.httpEvicted.Add(1) }

// Metrics returns a snapshot of the lane's counters and gauges: the core's
// and the HTTP API's.
func (s *API) Metrics() lane.Metrics {
	m := s.core.Metrics()
	m.HTTPConns, m.HTTPConnsRefused, m.HTTPConnsEvicted = s.metrics.httpOpen.Load(), s.metrics.httpRefused.Load(), s.metrics.httpEvicted.Load()
	m.BufferedContent, m.ContentBusy = s.budget.inUse(), s.metrics.contentBusy.Load()
	m.Forwarded = s.metrics.forwarded.Load()
	return m
}

// MetricsContentType is the Prometheus text exposition format.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// WriteMetrics writes the snapshot in the Prometheus text exposition format.
func (s *API) WriteMetrics(w io.Writer) error {
	m := s.Metrics()
	b := bufio.NewWriter(w)
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	counter := func(name, help, l0, l1 string, cs []lane.Count) {
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
	plain("sema_lane_http_connections_evicted_total", "Idle keep-alive HTTP connections, or ones still waiting for their request, closed to make room for a new one at the connection cap.", m.HTTPConnsEvicted)
	gauge("sema_lane_buffered_content_bytes", "Bytes of instruction bodies and write content held in memory now (reserved).", m.BufferedContent)
	plain("sema_lane_content_busy_total", "Instruction requests refused 503 service.busy: the buffered-content budget was full.", m.ContentBusy)
	plain("sema_lane_forwarded_total", "Device requests forwarded to the lane replica holding the device's connection.", m.Forwarded)
	plain("sema_lane_history_rows_dropped_total", "Instruction history rows lost: the registry refused writes until the history's queue was full, or at shutdown.", m.HistoryRowsDropped)
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
func (s *API) MetricsHandler() http.Handler {
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

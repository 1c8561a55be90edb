package mqtt_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestTCPFaults puts a TCP fault proxy (toxiproxy) between one running service and
// PostgreSQL and, for each fault, runs HTTP writers (POST /api/v1.6/devices/<label>/
// with explicit timestamps) and MQTT 5 writers (QoS 1, one message in flight) before,
// during and after it. Writers retry an unacknowledged message, as devices do, and stop
// only once their last message is acknowledged. Checked for every fault:
//
//   - every acknowledged dot (HTTP 200, PUBACK 0x00) is stored, with its value;
//   - nothing is stored that was not acknowledged, and nothing twice;
//   - no HTTP answer other than 200 and 503 (with Retry-After), never a 500; no PUBACK
//     with an error reason, no DISCONNECT or CONNACK refusal other than 0x88 (server
//     unavailable);
//   - no HTTP write waits longer than the query timeout (+1.5 s), even when the
//     database does not answer at all (the blackhole);
//   - once the fault ends a write succeeds and /readyz answers 200;
//   - the fault did reach the service (writes slowed down or failed during it).
func TestTCPFaults(t *testing.T) {
	testenv.LoadTest(t)
	px := env.Proxied(t)
	cfg := env.Config()
	cfg.QueryTimeout = queryTimeout // bounds a commit's wait (and PostgreSQL's statement_timeout)
	in := start(t, env.Serve(t, px.DB, cfg))
	faults := []struct {
		name   string
		length time.Duration
		inject func(t *testing.T, stop <-chan struct{}) // returns when stop closes, toxics still in place
		felt   func(s *faultStats) bool                 // the fault reached the writers
	}{
		{"latency", 2 * time.Second, func(t *testing.T, stop <-chan struct{}) {
			px.Add(t, "latency", map[string]any{"latency": 100, "jitter": 25}, "upstream", "downstream")
			<-stop
		}, func(s *faultStats) bool {
			return s.slowest.Load() >= int64(200*time.Millisecond) && s.ackedDuring.Load() > 0
		}},
		{"reset mid-transaction", 2 * time.Second, func(t *testing.T, stop <-chan struct{}) {
			// every connection is reset (RST) when it next sends or receives: in the
			// middle of the transactions the writers keep open, at BEGIN, INSERT or COMMIT,
			// and on the way back of a COMMIT's answer; again and again
			for {
				px.Add(t, "reset_peer", map[string]any{"timeout": 0}, "upstream", "downstream")
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				px.Clear()
				select {
				case <-stop:
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		}, func(s *faultStats) bool { return s.failed.Load() > 0 }},
		{"blackhole", 6 * time.Second, func(t *testing.T, stop <-chan struct{}) {
			// every byte either way is dropped: open connections hang, new ones time out
			px.Add(t, "timeout", map[string]any{"timeout": 0}, "upstream", "downstream")
			time.Sleep(200 * time.Millisecond)
			// answered by its own deadline, not the kernel's give-up on the connection
			begin := time.Now()
			if r := in.http.Get("/readyz"); r.Status != 503 || time.Since(begin) > testenv.Patience {
				t.Errorf("/readyz during the blackhole: %d after %v, want 503", r.Status, time.Since(begin))
			}
			<-stop
		}, func(s *faultStats) bool { return s.http503.Load() > 0 }},
		{"slow link", 2 * time.Second, func(t *testing.T, stop <-chan struct{}) {
			// 16 KB/s each way, in segments of ~32 bytes 2 ms apart
			px.Add(t, "bandwidth", map[string]any{"rate": 16}, "upstream", "downstream")
			px.Add(t, "slicer", map[string]any{"average_size": 32, "size_variation": 16, "delay": 2000}, "upstream", "downstream")
			<-stop
		}, func(s *faultStats) bool {
			return s.slowest.Load() >= int64(100*time.Millisecond) && s.ackedDuring.Load() > 0
		}},
	}
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Cleanup(px.Clear)
			runFault(t, in, px, fmt.Sprintf("f%d", i), f.length, f.inject, f.felt)
		})
	}
}

// queryTimeout is the fault tests' SENSORAPI_QUERY_TIMEOUT.
const queryTimeout = 3 * time.Second

// faultStats is what the writers saw.
type faultStats struct {
	during      atomic.Bool  // the fault is in place
	ackedDuring atomic.Int64 // acknowledgements that arrived while it was
	failed      atomic.Int64 // 503s, DISCONNECTs, closed connections, refused CONNECTs
	http503     atomic.Int64
	longestHTTP atomic.Int64 // the longest HTTP answer, acknowledgement or not, ns
	bodies      sync.Map     // the 503 bodies seen
	slowest     atomic.Int64 // the longest acknowledged write, ns
}

// maxInto raises m to d.
func maxInto(m *atomic.Int64, d time.Duration) {
	for {
		old := m.Load()
		if int64(d) <= old || m.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

func (s *faultStats) ack(d time.Duration) {
	if s.during.Load() {
		s.ackedDuring.Add(1)
	}
	maxInto(&s.slowest, d)
}

// dotKey names a dot: device label and timestamp (ms).
type dotKey struct {
	device string
	ts     int64
}

func runFault(t *testing.T, in instance, px *testenv.Proxy, prefix string, faultFor time.Duration, inject func(*testing.T, <-chan struct{}), felt func(*faultStats) bool) {
	const httpWriters, mqttWriters = 4, 4
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	var stats faultStats
	var mu sync.Mutex
	acked := map[dotKey]float64{}
	record := func(k dotKey, v float64, d time.Duration) {
		mu.Lock()
		acked[k] = v
		mu.Unlock()
		stats.ack(d)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range httpWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			device := fmt.Sprintf("%s-http-%d", prefix, w)
			for ts := int64(1); ; ts += 2 {
				// two dots a request, resent until acknowledged
				body := map[string]any{"v": []map[string]any{{"value": ts, "timestamp": ts}, {"value": ts + 1, "timestamp": ts + 1}}}
				for {
					begin := time.Now()
					r := h.Post("/api/v1.6/devices/"+device+"/", body)
					took := time.Since(begin)
					maxInto(&stats.longestHTTP, took)
					if took > queryTimeout+1500*time.Millisecond {
						t.Errorf("%s: %d %s after %v (request id %s)", device, r.Status, r.Body, took, r.Header.Get("X-Request-Id"))
					}
					if r.Status == 200 {
						if string(r.Body) != `{"v":[{"status_code":201},{"status_code":201}]}` {
							t.Errorf("%s: 200 %s", device, r.Body)
						}
						record(dotKey{device, ts}, float64(ts), time.Since(begin))
						record(dotKey{device, ts + 1}, float64(ts+1), time.Since(begin))
						break
					}
					if r.Status != 503 || r.Header.Get("Retry-After") == "" {
						t.Errorf("%s: %d %s (Retry-After %q), want 200 or 503 with Retry-After", device, r.Status, r.Body, r.Header.Get("Retry-After"))
					}
					stats.failed.Add(1)
					if r.Status == 503 {
						stats.http503.Add(1)
						stats.bodies.Store(string(r.Body), true)
					}
					time.Sleep(50 * time.Millisecond)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	for w := range mqttWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mw := &faultWriter{t: t, addr: in.addr, tok: tok, device: fmt.Sprintf("%s-mqtt-%d", prefix, w), record: record}
			defer mw.close()
			for ts := int64(1); ; ts++ {
				for !mw.publish(ts) {
					stats.failed.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	done := make(chan struct{})
	injected := make(chan struct{})
	stats.during.Store(true)
	go func() { defer close(injected); inject(t, done) }()
	time.Sleep(faultFor)
	close(done)
	<-injected
	stats.during.Store(false)
	px.Clear()
	ended := time.Now()

	// healthy again: a write is acknowledged and /readyz answers 200
	probe := map[string]any{"value": 1, "timestamp": 1}
	for {
		w := h.Post("/api/v1.6/devices/"+prefix+"-probe/", map[string]any{"p": probe})
		if w.Status != 200 && w.Status != 503 {
			t.Errorf("probe write: %d %s", w.Status, w.Body)
		}
		r := h.Get("/readyz")
		if r.Status != 200 && r.Status != 503 {
			t.Errorf("/readyz: %d %s", r.Status, r.Body)
		}
		if w.Status == 200 && r.Status == 200 {
			break
		}
		if time.Since(ended) > testenv.Patience {
			t.Fatalf("not healthy %v after the fault ended: write %d %s, /readyz %d %s", testenv.Patience, w.Status, w.Body, r.Status, r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recovered := time.Since(ended)
	time.Sleep(300 * time.Millisecond) // writing on after the fault
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(testenv.Patience):
		t.Fatalf("writers still waiting for an acknowledgement %v after the fault ended", testenv.Patience)
	}

	stored := storedDots(t, tok)
	delete(stored, dotKey{prefix + "-probe", 1})
	for k, v := range acked {
		got, ok := stored[k]
		if !ok {
			t.Errorf("acknowledged dot %v lost", k)
		} else if got != v {
			t.Errorf("dot %v stored as %v, acknowledged as %v", k, got, v)
		}
	}
	for k := range stored {
		if _, ok := acked[k]; !ok {
			t.Errorf("dot %v stored but never acknowledged", k)
		}
	}
	// a write (lookups, its batch, its retry alone) is bounded by the query timeout:
	// it never waits as long as the database does not answer
	if d := time.Duration(stats.longestHTTP.Load()); d > queryTimeout+1500*time.Millisecond {
		t.Errorf("an HTTP write took %v, over the query timeout (%v)", d, queryTimeout)
	}
	if !felt(&stats) {
		t.Errorf("the fault did not show: %d acknowledged during it, %d failed attempts, slowest write %v",
			stats.ackedDuring.Load(), stats.failed.Load(), time.Duration(stats.slowest.Load()))
	}
	t.Logf("%d dots acknowledged and stored (%d during the fault), %d failed attempts (%d HTTP 503s), slowest write %v (HTTP answer %v), healthy %v after the fault ended",
		len(acked), stats.ackedDuring.Load(), stats.failed.Load(), stats.http503.Load(), time.Duration(stats.slowest.Load()).Round(time.Millisecond),
		time.Duration(stats.longestHTTP.Load()).Round(time.Millisecond),
		recovered.Round(time.Millisecond))
	stats.bodies.Range(func(b, _ any) bool { t.Logf("503 %s", b); return true })
}

// storedDots reads the account's dots straight from the database (not through the
// proxy), failing on a (device, timestamp) stored twice.
func storedDots(t *testing.T, tok string) map[dotKey]float64 {
	t.Helper()
	var rows []struct {
		Device string  `bun:"device"`
		TS     int64   `bun:"ts"`
		Value  float64 `bun:"value"`
	}
	err := env.DB.NewRaw(`SELECT d.label AS device, (extract(epoch FROM v.ts) * 1000)::bigint AS ts, v.value
		FROM "values" v JOIN variables x ON x.id = v.variable_id JOIN devices d ON d.id = x.device_id
		WHERE d.account_id = (SELECT account_id FROM tokens WHERE hash = sha256(convert_to(?, 'UTF8')))`, tok).
		Scan(context.Background(), &rows)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[dotKey]float64, len(rows))
	for _, r := range rows {
		k := dotKey{r.Device, r.TS}
		if _, dup := m[k]; dup {
			t.Errorf("dot %v stored twice", k)
		}
		m[k] = r.Value
	}
	return m
}

// faultWriter is an MQTT 5 device publishing one QoS 1 message at a time on its own
// connection, reconnecting when the server closes it.
type faultWriter struct {
	t      *testing.T
	addr   string
	tok    string
	device string
	record func(dotKey, float64, time.Duration)
	c      net.Conn
	r      *bufio.Reader
	id     uint16
	dup    bool // the message is a redelivery
}

// publish sends the dot (value ts at ts) and tells whether it was acknowledged; a
// refusal the test does not allow fails the test.
func (w *faultWriter) publish(ts int64) bool {
	t := w.t
	begin := time.Now()
	if w.c == nil && !w.connect() {
		return false
	}
	w.id++
	if w.id == 0 {
		w.id = 1
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Dup: w.dup}, ProtocolVersion: 5,
		PacketID: w.id, TopicName: "/v1.6/devices/" + w.device + "/v",
		Payload: []byte(fmt.Sprintf(`{"value":%d,"timestamp":%d}`, ts, ts))}
	w.dup = true
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Write(buf.Bytes()); err != nil {
		w.close()
		return false
	}
	ack, ok := w.read(packets.Puback)
	if !ok {
		return false
	}
	if ack.PacketID != w.id || ack.ReasonCode != 0 {
		t.Errorf("%s: PUBACK %d 0x%02x for message %d", w.device, ack.PacketID, ack.ReasonCode, w.id)
		return false
	}
	w.dup = false
	w.record(dotKey{w.device, ts}, float64(ts), time.Since(begin))
	return true
}

func (w *faultWriter) connect() bool {
	c, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
	if err != nil {
		w.t.Errorf("%s: dial the broker: %v", w.device, err)
		return false
	}
	w.c, w.r = c, bufio.NewReader(c)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30,
			ClientIdentifier: fmt.Sprintf("%s-%d", w.device, time.Now().UnixNano()), UsernameFlag: true, Username: []byte(w.tok)}}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		w.t.Fatal(err)
	}
	if _, err := c.Write(buf.Bytes()); err != nil {
		w.close()
		return false
	}
	ack, ok := w.read(packets.Connack)
	if !ok {
		return false
	}
	if ack.ReasonCode != 0 {
		// the token is checked against the database when the caches cannot be trusted
		if ack.ReasonCode != packets.ErrServerUnavailable.Code {
			w.t.Errorf("%s: CONNACK 0x%02x, want 0x00 or 0x88", w.device, ack.ReasonCode)
		}
		w.close()
		return false
	}
	return true
}

// read reads the next packet: want, or a DISCONNECT 0x88 (false), or the end of the
// connection (false). Anything else fails the test.
func (w *faultWriter) read(want byte) (packets.Packet, bool) {
	pk := packets.Packet{ProtocolVersion: 5}
	_ = w.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	hb, err := w.r.ReadByte()
	if err != nil {
		w.close()
		return pk, false
	}
	if err := pk.FixedHeader.Decode(hb); err != nil {
		w.t.Fatal(err)
	}
	n, _, err := packets.DecodeLength(w.r)
	if err != nil {
		w.close()
		return pk, false
	}
	pk.FixedHeader.Remaining = n // the decoders read reason codes only when it says they are there
	body := make([]byte, n)
	if _, err := io.ReadFull(w.r, body); err != nil {
		w.close()
		return pk, false
	}
	switch pk.FixedHeader.Type {
	case want:
		if want == packets.Connack {
			err = pk.ConnackDecode(body)
		} else {
			err = pk.PubackDecode(body)
		}
		if err != nil {
			w.t.Fatal(err)
		}
		return pk, true
	case packets.Disconnect:
		if err := pk.DisconnectDecode(body); err != nil {
			w.t.Fatal(err)
		}
		if pk.ReasonCode != packets.ErrServerUnavailable.Code {
			w.t.Errorf("%s: DISCONNECT 0x%02x, want 0x88", w.device, pk.ReasonCode)
		}
	default:
		w.t.Errorf("%s: packet type %d, want %d", w.device, pk.FixedHeader.Type, want)
	}
	w.close()
	return pk, false
}

func (w *faultWriter) close() {
	if w.c != nil {
		_ = w.c.Close()
		w.c = nil
	}
}

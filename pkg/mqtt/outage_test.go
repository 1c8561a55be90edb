package mqtt_test

import (
	"context"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestOutageNoPubackThenRedelivery: with the database down a QoS 1 publish gets no
// PUBACK and its connection is closed; the client reconnects after the restart,
// sends the message again, and it is stored exactly once.
func TestOutageNoPubackThenRedelivery(t *testing.T) {
	e, tsdb := testenv.Stoppable(t, true)
	ctx := context.Background()
	in := start(t, e.Client(t))
	post(t, in.http, "outage", "t", 1, 1) // device and variable exist and are cached

	lost := make(chan struct{}, 10)
	c := connect(t, in.addr, e.AdminToken, func(o *paho.ClientOptions) {
		o.SetCleanSession(false).SetClientID("outage-client").SetAutoReconnect(true).
			SetMaxReconnectInterval(500 * time.Millisecond).
			SetConnectionLostHandler(func(paho.Client, error) { lost <- struct{}{} })
	})
	if err := tsdb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	tk := c.Publish("v1.6/devices/outage/t", 1, false, `{"value":42,"timestamp":777}`)
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection stayed open while the database was down")
	}
	if tk.WaitTimeout(0) {
		t.Fatalf("a PUBACK arrived while the database was down (%v)", tk.Error())
	}
	if err := tsdb.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// paho completes the first token when it resends the message after reconnecting,
	// not on that resend's PUBACK: watch the database instead
	stored := func() (n int) {
		err := e.DB.NewRaw(`SELECT count(*) FROM "values" WHERE ts = to_timestamp(0.777) AND value = 42`).Scan(ctx, &n)
		if err != nil {
			n = -1 // the pool is still reconnecting
		}
		return n
	}
	deadline := time.Now().Add(90 * time.Second)
	for stored() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the message was not redelivered and stored after the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // a second delivery would show by now
	if n := stored(); n != 1 {
		t.Fatalf("the message is stored %d times, want once", n)
	}
}

// TestDiskFullDisconnectsWithQuotaExceeded: when PostgreSQL reports a full disk
// (SQLSTATE 53100, raised by a trigger on one variable's values) an MQTT 5 publish gets
// no PUBACK: the server sends DISCONNECT with reason 0x97 (quota exceeded) and closes
// the connection, so the client keeps the message; nothing is stored.
func TestDiskFullDisconnectsWithQuotaExceeded(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	conn, _ := dialRaw(t, in.addr, 5, tok, func(*packets.ConnectParams) {})
	conn.publish(t, 1, "/v1.6/devices/full/t", "1") // device and variable exist and are cached
	var key int64
	if err := env.DB.NewRaw(`SELECT v.id FROM variables v JOIN devices d ON d.id = v.device_id
		WHERE d.label = 'full' AND d.account_id = (SELECT account_id FROM tokens
		WHERE hash = sha256(convert_to(?, 'UTF8')))`, tok).Scan(context.Background(), &key); err != nil {
		t.Fatal(err)
	}
	env.InjectFault(t, key, "disk_full")
	conn.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 9,
		TopicName: "/v1.6/devices/full/t", Payload: []byte("2")})
	if d := conn.read(t, packets.Disconnect); d.ReasonCode != packets.ErrQuotaExceeded.Code {
		t.Fatalf("DISCONNECT 0x%02x, want 0x97", d.ReasonCode)
	}
	if got := values(t, in.http.As(tok), "full", "t"); len(got) != 1 {
		t.Fatalf("stored %v, want only the first value", got)
	}
}

// TestStorageBudget: past SENSORAPI_WRITE_STOP_SIZE an MQTT 5 publish gets PUBACK
// 0x97 (quota exceeded); a 3.1.1 one, which has no negative PUBACK, gets none and its
// connection is closed, so the client keeps the message. Nothing is stored.
func TestStorageBudget(t *testing.T) {
	cfg := env.Config()
	cfg.WriteStopSize = 1 // the database is always past it
	in := start(t, env.ClientWith(t, cfg))
	tok := env.NewAccount(t)
	for deadline := time.Now().Add(testenv.Patience); ; time.Sleep(20 * time.Millisecond) {
		s, _ := in.http.Get("/healthz").Object(t)["storage"].(map[string]any)
		if s["bytes"].(float64) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the storage size was not measured")
		}
	}
	v5, _ := dialRaw(t, in.addr, 5, tok, func(*packets.ConnectParams) {})
	v5.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1,
		TopicName: "/v1.6/devices/over/t", Payload: []byte("1")})
	if ack := v5.read(t, packets.Puback); ack.ReasonCode != packets.ErrQuotaExceeded.Code {
		t.Fatalf("v5 PUBACK 0x%02x, want 0x97", ack.ReasonCode)
	}
	v3, _ := dialRaw(t, in.addr, 4, tok, func(*packets.ConnectParams) {})
	v3.send(t, packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1,
		TopicName: "/v1.6/devices/over/t", Payload: []byte("2")})
	_ = v3.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := v3.r.ReadByte(); err == nil {
		t.Fatalf("3.1.1 got a packet (type %d) instead of a closed connection", b>>4)
	}
	if got := values(t, in.http.As(tok), "over", "t"); len(got) != 0 {
		t.Fatalf("stored over the budget: %v", got)
	}
}

package mqtt_test

import (
	"context"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/pkg/testenv"
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

package mqtt_test

import (
	"testing"
	"time"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// TestLastValuesAfterListenerGap: a last value that moves while an instance's LISTEN
// connection is away (a failover, a lost connection: its notification is lost) reaches
// that instance's subscribers once it listens again, and nothing older does.
func TestLastValuesAfterListenerGap(t *testing.T) {
	px := env.Proxied(t)
	in := start(t, env.Serve(t, px.DB, env.Config())) // reaches the database through px
	other := env.Instance(t)                          // does not
	tok := env.NewAccount(t)
	post(t, other.As(tok), "gap", "t", 1, 1000)
	c := connect(t, in.addr, tok)
	lv := subscribe(t, c, "/v1.6/devices/gap/t/lv")
	expect(t, lv, "/v1.6/devices/gap/t/lv", "1")

	// every connection of in is reset as soon as it sends or receives: the listener's
	// next ping (within 2 s) fails, and so does each reconnection while the toxic stays
	px.Add(t, "reset_peer", map[string]any{"timeout": 0}, "upstream", "downstream")
	for deadline := time.Now().Add(testenv.Patience); in.http.Server.Listener.Healthy(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not notice its connection was reset")
		}
	}
	post(t, other.As(tok), "gap", "t", 2, 2000) // notified while nobody of in listens
	post(t, other.As(tok), "gap", "t", 0, 500)  // older: stored, the last value stays 2
	quiet(t, lv, 300*time.Millisecond)
	px.Clear()
	expect(t, lv, "/v1.6/devices/gap/t/lv", "2")
	quiet(t, lv, 500*time.Millisecond)
}

package mqtt_test

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// refused checks that a 3.1.1 subscription was refused (SUBACK 0x80).
func refused(t *testing.T, c paho.Client, filter string) {
	t.Helper()
	tk := c.Subscribe(filter, 0, nil)
	tk.WaitTimeout(5 * time.Second)
	if got := tk.(*paho.SubscribeToken).Result()[filter]; got != 0x80 {
		t.Errorf("subscribe %s: %#x, want 0x80", filter, got)
	}
}

// TestDeviceTokenTopics: a device token publishes and subscribes under its own device
// and is not authorized on another device's topics; a read token subscribes but may
// not publish.
func TestDeviceTokenTopics(t *testing.T) {
	in := newInstance(t)
	full := in.http.As(env.NewAccount(t))
	post(t, full, "mine", "t", 1, 100)
	post(t, full, "theirs", "t", 1, 100)
	dev := full.NewToken("/api/v2.0/devices/~mine/tokens/", map[string]any{"label": "fw"})
	read := full.NewToken("/api/v2.0/tokens/", map[string]any{"label": "dash", "scope": "read"})

	c := connect(t, in.addr, dev)
	own := subscribe(t, c, "v1.6/devices/mine/+/lv")
	expect(t, own, "v1.6/devices/mine/t/lv", "1")
	publish(t, c, "v1.6/devices/mine/t", `{"value":2,"timestamp":200}`)
	expect(t, own, "v1.6/devices/mine/t/lv", "2")
	refused(t, c, "v1.6/devices/theirs/t/lv")
	refused(t, c, "v1.6/devices/+/t/lv")

	host, port := hostPort(in.addr)
	for _, who := range []struct{ name, tok, topic string }{
		{"device token to another device", dev, "v1.6/devices/theirs/t"},
		{"read token", read, "v1.6/devices/mine/t"},
	} {
		out, err := mosquitto(t, "", "mosquitto_pub", "-V", "mqttv5", "-h", host, "-p", port, "-u", who.tok,
			"-t", who.topic, "-m", `{"value":9,"timestamp":900}`, "-q", "1", "-d")
		if err != nil || !strings.Contains(out, "RC:135") {
			t.Errorf("%s: want PUBACK 0x87 (135): %v\n%s", who.name, err, out)
		}
	}
	for d, want := range map[string]int{"mine": 2, "theirs": 1} { // nothing refused was written
		if v := values(t, full, d, "t"); len(v) != want {
			t.Errorf("%s holds %v, want %d values", d, v, want)
		}
	}
	r := connect(t, in.addr, read)
	expect(t, subscribe(t, r, "v1.6/devices/+/t/lv"), "v1.6/devices/theirs/t/lv", "1")
}

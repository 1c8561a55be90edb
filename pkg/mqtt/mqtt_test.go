package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

// values reads a variable's values over HTTP, newest first.
func values(t *testing.T, c *testenv.Client, device, variable string) []map[string]any {
	t.Helper()
	r := c.Get(fmt.Sprintf("/api/v1.6/devices/%s/%s/values?page_size=1000", device, variable))
	if r.Status == 404 {
		return nil
	}
	if r.Status != 200 {
		t.Fatalf("read %s/%s: %d %s", device, variable, r.Status, r.Body)
	}
	var body struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Results
}

// TestConnectNeedsAValidToken: a wrong or deleted token is refused (3.1.1 return code
// 4 through paho, 5.0 reason 0x86 through mosquitto_pub) and nothing is written.
func TestConnectNeedsAValidToken(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	if _, err := env.DB.ExecContext(context.Background(), `DELETE FROM tokens WHERE hash = sha256(convert_to(?, 'UTF8'))`, tok); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"not-a-token", tok} {
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + in.addr).SetUsername(bad).SetAutoReconnect(false))
		tk := c.Connect()
		tk.WaitTimeout(5 * time.Second)
		if err := tk.Error(); err == nil || !strings.Contains(err.Error(), "bad user name or password") {
			t.Errorf("3.1.1 connect with a bad token: %v", err)
		}
		host, port := hostPort(in.addr)
		out, err := mosquitto(t, "", "mosquitto_pub", "-V", "mqttv5", "-h", host, "-p", port, "-u", bad,
			"-t", "v1.6/devices/refused", "-m", `{"t":1}`, "-q", "1")
		if err == nil || !strings.Contains(strings.ToLower(out), "bad user name or password") {
			t.Errorf("5.0 connect with a bad token: %v %s", err, out)
		}
	}
	var n int
	if err := env.DB.NewRaw(`SELECT count(*) FROM devices WHERE label = 'refused'`).Scan(context.Background(), &n); err != nil || n != 0 {
		t.Fatalf("%d devices written by refused clients (%v)", n, err)
	}
}

// TestPublishReadableOnPuback: a QoS 1 publish is readable over HTTP as soon as its
// PUBACK arrives, on the device topic, the variable topic with a number and with a
// list of dots, with and without a leading "/"; through paho (3.1.1) and mosquitto_pub
// (5.0).
func TestPublishReadableOnPuback(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	c := connect(t, in.addr, tok)

	publish(t, c, "/v1.6/devices/pub-dev", `{"temperature":{"value":21.5,"timestamp":1000},"humidity":40}`)
	if v := values(t, h, "pub-dev", "temperature"); len(v) != 1 || v[0]["value"] != 21.5 || v[0]["timestamp"] != 1000.0 {
		t.Fatalf("device topic: %v", v)
	}
	publish(t, c, "v1.6/devices/pub-dev/pressure", "1013.25")
	if v := values(t, h, "pub-dev", "pressure"); len(v) != 1 || v[0]["value"] != 1013.25 {
		t.Fatalf("variable topic, number: %v", v)
	}
	publish(t, c, "/v1.6/devices/PUB-dev/pressure", `[{"value":1,"timestamp":5},{"value":2,"timestamp":6}]`)
	if v := values(t, h, "pub-dev", "pressure"); len(v) != 3 || v[1]["value"] != 2.0 {
		t.Fatalf("variable topic, list of dots (label lowercased): %v", v)
	}

	host, port := hostPort(in.addr)
	out, err := mosquitto(t, "", "mosquitto_pub", "-V", "mqttv5", "-h", host, "-p", port, "-u", tok,
		"-t", "/v1.6/devices/pub-dev/wind", "-m", `{"value":7,"timestamp":9000}`, "-q", "1")
	if err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	if v := values(t, h, "pub-dev", "wind"); len(v) != 1 || v[0]["value"] != 7.0 {
		t.Fatalf("mosquitto_pub 5.0: %v", v)
	}
}

var pubackRC = regexp.MustCompile(`received PUBACK \(Mid: \d+, RC:(\d+)\)`)

// TestInvalidPublishesWriteNothing: not JSON, NaN, a bad label, a bad timestamp or a
// wrong topic write nothing; MQTT 5 gets 0x99 (153) or 0x87 (135) in its PUBACK, and
// the same connection then publishes a valid message that is stored.
func TestInvalidPublishesWriteNothing(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	h := in.http.As(tok)
	host, port := hostPort(in.addr)
	for i, c := range []struct {
		name, topic, bad, good string
		rc                     string
	}{
		{"not JSON", "v1.6/devices/inv", "not json", `{"t":{"value":1,"timestamp":1}}`, "153"},
		{"NaN", "v1.6/devices/inv", `{"t": NaN}`, `{"t":{"value":2,"timestamp":2}}`, "153"},
		{"bad label", "/v1.6/devices/inv", `{"bad label!": 1}`, `{"t":{"value":3,"timestamp":3}}`, "153"},
		{"bad timestamp", "v1.6/devices/inv/t", `{"value": 1, "timestamp": -3}`, `{"value":4,"timestamp":4}`, "153"},
		{"wrong topic", "v1.6/other/inv", `{"t": 1}`, "", "135"},
		{"bad device label", "v1.6/devices/in v", `{"t": 1}`, "", "135"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// -l: one message per line, on one connection: the bad one, then the good one
			// (or the bad one again where no good one fits the topic)
			second, want := c.good, []string{c.rc, "0"}
			if second == "" {
				second, want = c.bad, []string{c.rc, c.rc}
			}
			out, err := mosquitto(t, c.bad+"\n"+second+"\n", "mosquitto_pub", "-V", "mqttv5", "-h", host, "-p", port,
				"-u", tok, "-t", c.topic, "-q", "1", "-d", "-l")
			if err != nil {
				t.Fatalf("mosquitto_pub: %v %s", err, out)
			}
			var got []string
			for _, m := range pubackRC.FindAllStringSubmatch(out, -1) {
				got = append(got, m[1])
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("PUBACK reasons %v, want %v:\n%s", got, want, out)
			}
			if c.good != "" {
				if v := values(t, h, "inv", "t"); len(v) != min(i+1, 4) {
					t.Fatalf("after the good message: %d values stored, want %d", len(v), min(i+1, 4))
				}
			}
		})
	}
	if v := values(t, h, "inv", "t"); len(v) != 4 {
		t.Fatalf("%d values stored, want the 4 good ones", len(v))
	}
}

// TestOversizedPacketClosesConnection: a packet over 1 MiB closes the connection and
// writes nothing.
func TestOversizedPacketClosesConnection(t *testing.T) {
	in := newInstance(t)
	tok := env.NewAccount(t)
	lost := make(chan struct{}, 1)
	c := connect(t, in.addr, tok, func(o *paho.ClientOptions) {
		o.SetConnectionLostHandler(func(paho.Client, error) { lost <- struct{}{} })
	})
	big := `{"value":1,"context":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	c.Publish("v1.6/devices/big/t", 1, false, big)
	select {
	case <-lost:
	case <-time.After(testenv.Patience):
		t.Fatal("the connection stayed open after a 2 MiB packet")
	}
	if v := values(t, in.http.As(tok), "big", "t"); len(v) != 0 {
		t.Fatalf("stored %v", v)
	}
}

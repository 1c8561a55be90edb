package mqtt_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/sensordata/sensorapi/pkg/config"
	"github.com/sensordata/sensorapi/testcontainers/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// instance is one running service: HTTP through the client, MQTT at addr.
type instance struct {
	http *testenv.Client
	addr string // host:port of the plain MQTT listener
}

// start runs the broker on a server of the given HTTP client's instance.
func start(t *testing.T, c *testenv.Client) instance {
	t.Helper()
	b, err := c.Server.StartMQTT(config.MQTT{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return instance{http: c, addr: b.Addrs()[0].String()}
}

// newInstance starts the service (HTTP and MQTT) on the test database.
func newInstance(t *testing.T) instance { t.Helper(); return start(t, env.Client(t)) }

// connect opens a paho (MQTT 3.1.1) connection with the token as username.
func connect(t *testing.T, addr, tok string, tweak ...func(*paho.ClientOptions)) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetUsername(tok).
		SetClientID("t-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000")).
		SetConnectTimeout(5 * time.Second).SetAutoReconnect(false)
	for _, f := range tweak {
		f(o)
	}
	c := paho.NewClient(o)
	tk := c.Connect()
	if !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("connect: %v", tk.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// publish sends one QoS 1 message and waits for its PUBACK.
func publish(t *testing.T, c paho.Client, topic string, payload any) {
	t.Helper()
	tk := c.Publish(topic, 1, false, payload)
	if !tk.WaitTimeout(10*time.Second) || tk.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tk.Error())
	}
}

// mosquitto runs one of Debian's mosquitto-clients commands (a client nobody here
// wrote) with stdin, and returns its combined output.
func mosquitto(t *testing.T, stdin string, name string, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: install Debian's mosquitto-clients (CI's .ci/run does)", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// hostPort splits addr for mosquitto's -h and -p.
func hostPort(addr string) (string, string) {
	i := strings.LastIndex(addr, ":")
	return addr[:i], addr[i+1:]
}

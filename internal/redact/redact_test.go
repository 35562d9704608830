package redact

import "testing"

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"":                                    "",
		"sqlite:./seckill-data/seckill.db":    "sqlite:./seckill-data/seckill.db",
		"mysql://root@127.0.0.1:3306/test":    "mysql://root@127.0.0.1:3306/test",
		"amqp://guest:guest@127.0.0.1:5672/":  "amqp://guest:xxxxx@127.0.0.1:5672/",
		"redis://:s3cret@redis:6379/0":        "redis://:xxxxx@redis:6379/0",
		"postgres://u:p%40ss@h/db?sslmode=no": "postgres://u:xxxxx@h/db?sslmode=no",
		"redis://u:pa ss@h\x7f":               "(malformed URL)",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

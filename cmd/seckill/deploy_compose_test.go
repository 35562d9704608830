package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployCompose parses deploy/docker-compose.yml: the production
// topology's services are there, every SECKILL_* variable a node gets is
// one Config.register defines, the nodes believe X-Forwarded-For from
// nginx's network only, and nginx.conf keeps the 20-a-minute limit_req.
func TestDeployCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Build       any               `yaml:"build"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			Volumes     []string          `yaml:"volumes"`
			Networks    any               `yaml:"networks"`
		} `yaml:"services"`
		Networks map[string]struct {
			IPAM struct {
				Config []struct {
					Subnet string `yaml:"subnet"`
				} `yaml:"config"`
			} `yaml:"ipam"`
		} `yaml:"networks"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	images := map[string]string{"redis": "redis:", "rabbitmq": "rabbitmq:", "postgres": "postgres:", "nginx": "nginx:"}
	for svc, prefix := range images {
		s, ok := doc.Services[svc]
		if !ok {
			t.Errorf("no service %s", svc)
			continue
		}
		if !strings.HasPrefix(s.Image, prefix) {
			t.Errorf("service %s runs image %q, want %s…", svc, s.Image, prefix)
		}
	}

	known := map[string]bool{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := DefaultConfig()
	if err := cfg.register(fs); err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) { known[envName(f.Name)] = true })
	if len(known) < 20 {
		t.Fatalf("Config.register defines only %d variables", len(known))
	}

	edge := doc.Networks["edge"].IPAM.Config
	if len(edge) != 1 || edge[0].Subnet == "" {
		t.Fatalf("network edge has no subnet: %+v", edge)
	}
	nginxNets, _ := doc.Services["nginx"].Networks.(map[string]any)
	nginxEdge, _ := nginxNets["edge"].(map[string]any)
	nginxAddr, _ := nginxEdge["ipv4_address"].(string)
	if nginxAddr == "" {
		t.Fatal("nginx has no fixed address on the edge network for the nodes to trust")
	}
	if !slices.Contains(doc.Services["nginx"].Ports, "443:443") || !slices.Contains(doc.Services["nginx"].Volumes, "./tls:/etc/nginx/tls:ro") {
		t.Errorf("nginx does not publish 443 with deploy/tls mounted: ports %v, volumes %v", doc.Services["nginx"].Ports, doc.Services["nginx"].Volumes)
	}
	for _, node := range []string{"seckill-1", "seckill-2"} {
		s, ok := doc.Services[node]
		if !ok {
			t.Errorf("no service %s", node)
			continue
		}
		if s.Build == nil {
			t.Errorf("%s has no build", node)
		}
		for name := range s.Environment {
			if !known[name] {
				t.Errorf("%s: %s is not a configuration variable of seckill serve", node, name)
			}
		}
		env := s.Environment
		for _, need := range []string{"SECKILL_REDIS_URL", "SECKILL_BROKER_URL", "SECKILL_DATABASE_URL", "SECKILL_JWT_SECRET", "SECKILL_ADMIN_TOKEN", "SECKILL_TRUSTED_PROXIES", "SECKILL_DATA_DIR"} {
			if env[need] == "" {
				t.Errorf("%s: %s is not set", node, need)
			}
		}
		if !strings.HasPrefix(env["SECKILL_REDIS_URL"], "redis://redis:") ||
			!strings.HasPrefix(env["SECKILL_BROKER_URL"], "amqp://") || !strings.Contains(env["SECKILL_BROKER_URL"], "@rabbitmq:") ||
			!strings.HasPrefix(env["SECKILL_DATABASE_URL"], "postgres://") || !strings.Contains(env["SECKILL_DATABASE_URL"], "@postgres:") {
			t.Errorf("%s is not pointed at the compose file's Redis, RabbitMQ and PostgreSQL: %v", node, env)
		}
		if env["SECKILL_TRUSTED_PROXIES"] != nginxAddr {
			t.Errorf("%s trusts %q, want nginx's own address %s and nothing else", node, env["SECKILL_TRUSTED_PROXIES"], nginxAddr)
		}
	}
	if a, b := doc.Services["seckill-1"].Environment, doc.Services["seckill-2"].Environment; a["SECKILL_JWT_SECRET"] != b["SECKILL_JWT_SECRET"] || a["SECKILL_ADMIN_TOKEN"] != b["SECKILL_ADMIN_TOKEN"] || a["SECKILL_REDIS_KEY_PREFIX"] != b["SECKILL_REDIS_KEY_PREFIX"] || a["SECKILL_BROKER_QUEUE"] != b["SECKILL_BROKER_QUEUE"] {
		t.Error("the nodes must share the JWT secret, admin token, key prefix and broker queue (README, Running several nodes)")
	}
	if _, err := os.Stat(filepath.Join(deployDir, "Dockerfile")); err != nil {
		t.Errorf("the nodes build deploy/Dockerfile: %v", err)
	}

	conf, err := os.ReadFile(filepath.Join(deployDir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(conf)
	zone := regexp.MustCompile(`limit_req_zone\s+\$binary_remote_addr\s+zone=(\w+):\w+\s+rate=20r/m;`).FindStringSubmatch(c)
	if zone == nil {
		t.Fatal("nginx.conf has no 20r/m limit_req_zone per client address")
	}
	if !regexp.MustCompile(`location [^{]*reservations[^{]*\{[^}]*limit_req zone=` + zone[1] + `\b`).MatchString(c) {
		t.Errorf("the reservation location does not apply limit_req zone=%s", zone[1])
	}
	// The nodes get the address nginx established, not a client's header
	// with it appended.
	if !strings.Contains(c, "proxy_set_header X-Forwarded-For $remote_addr;") || strings.Contains(c, "$proxy_add_x_forwarded_for") {
		t.Error("nginx.conf must pass X-Forwarded-For $remote_addr (replacing the client's) to the nodes")
	}
	for _, node := range []string{"seckill-1:8080", "seckill-2:8080"} {
		if !strings.Contains(c, "server "+node) {
			t.Errorf("nginx.conf upstream lacks %s", node)
		}
	}
}

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// deployDir is the repository's deploy/ directory, seen from cmd/seckill.
var deployDir = filepath.Join("..", "..", "deploy")

var metricName = regexp.MustCompile(`\bseckill_[a-z0-9_]+\b`)

// dashboardExprs returns every PromQL expression of deploy/grafana/seckill.json.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "grafana", "seckill.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs returns alert name → expression of deploy/prometheus/alerts.yml.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	if err := yaml.Unmarshal(raw, &r); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" || rule.Expr == "" {
				t.Errorf("group %s: rule %+v lacks alert or expr", g.Name, rule)
			}
			out[rule.Alert] = rule.Expr
		}
	}
	return out
}

// TestDeployMonitoringCoversTheIssue checks that the dashboard has a panel
// and the rules an alert for each thing an operator must watch.
func TestDeployMonitoringCoversTheIssue(t *testing.T) {
	all := strings.Join(dashboardExprs(t), "\n")
	for _, m := range []string{
		"seckill_stock_remaining", `outcome="reserved"`, `outcome!~"reserved|replayed"`,
		"seckill_reconcile_outbox_entries", "seckill_reconcile_unrecorded_units",
		"seckill_orders_persisted_total", "seckill_failed_orders_total",
		"seckill_reconcile_restores_alerted", "seckill_reconcile_balanced", "seckill_broker_backlog_messages",
		"seckill_failed_orders_resolved_total",
	} {
		if !strings.Contains(all, m) {
			t.Errorf("dashboard has no query with %s", m)
		}
	}
	rules := alertExprs(t)
	var joined []string
	for _, e := range rules {
		joined = append(joined, e)
	}
	alerts := strings.Join(joined, "\n")
	for _, m := range []string{
		"seckill_failed_orders_total", "seckill_restore_alerts_total", "seckill_reconcile_balanced",
		"seckill_reconcile_outbox_entries", "seckill_stock_store_heals_total", "seckill_lost_claims_total",
		"seckill_broker_backlog_messages", "seckill_order_event_dead_letters_total", "seckill_order_events_oldest_pending_seconds",
		"seckill_lottery_draw_waiting_seconds", "seckill_queue_admitted_total", "seckill_queue_tickets_refused_total",
	} {
		if !strings.Contains(alerts, m) {
			t.Errorf("no alert rule uses %s", m)
		}
	}
}

// TestDeployMetricsAreExported starts an embedded engine, runs one
// reservation through to an order, and waits until /metrics declares
// every metric the dashboard and the alert rules name.
func TestDeployMetricsAreExported(t *testing.T) {
	want := map[string][]string{} // metric → where it is used
	for _, e := range dashboardExprs(t) {
		for _, m := range metricName.FindAllString(e, -1) {
			want[m] = append(want[m], "dashboard")
		}
	}
	for a, e := range alertExprs(t) {
		for _, m := range metricName.FindAllString(e, -1) {
			want[m] = append(want[m], "alert "+a)
		}
	}
	if len(want) < 10 {
		t.Fatalf("only %d metric names found in deploy/: %v", len(want), want)
	}

	// An order webhook, so the order-event metrics are exported too.
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(shop.Close)
	e := startEngine(t, func(c *Config) {
		c.ReconcileInterval = 50 * time.Millisecond
		c.Events.WebhookURL, c.Events.WebhookSecret = shop.URL, shopSecret
	})
	sale := e.liveSale(5, 1)
	if r := e.reserve(sale, e.token("deploy-buyer"), 1, ""); r.status != 202 && r.status != 201 {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	// A lottery and a queue sale, whose metrics exist only while such a
	// sale is loaded.
	e.createLottery(5, 1, 30*time.Minute)
	e.createQueue(5, 4, time.Now().Add(-time.Second))
	var missing []string
	exported := func() bool {
		resp, err := e.client.Get(e.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		declared := map[string]bool{}
		for _, l := range strings.Split(string(body), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				declared[f[2]] = true
			}
		}
		missing = missing[:0]
		for m := range want {
			if !declared[m] {
				missing = append(missing, m)
			}
		}
		return len(missing) == 0
	}
	if !servicetest.Eventually(30*time.Second, exported) {
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("%s (used by %v) is not exported by /metrics", m, want[m])
		}
	}
}

// TestDeployAlertRulesPromtool runs `promtool check rules` on the alert
// rules, and `promtool test rules` on their unit tests (alerts_test.yml),
// when promtool is installed (Debian package prometheus).
func TestDeployAlertRulesPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus); alerts.yml is checked by the YAML tests only")
	}
	out, err := exec.Command(bin, "check", "rules", filepath.Join(deployDir, "prometheus", "alerts.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "test", "rules", filepath.Join(deployDir, "prometheus", "alerts_test.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// fakeAdmission is the stock store's and the draw store's side of
// admission sales, as the collector reads them.
type fakeAdmission struct {
	mu       sync.Mutex
	sales    []*seckill.Sale
	entrants map[string]int64
	queue    map[string]int64
	drawn    map[string]bool
	broken   map[string]bool
}

func (f *fakeAdmission) Loaded() []*seckill.Sale { f.mu.Lock(); defer f.mu.Unlock(); return f.sales }

func (f *fakeAdmission) EntrantCount(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken[id] {
		return 0, errors.New("unreachable")
	}
	return f.entrants[id], nil
}

func (f *fakeAdmission) Length(_ context.Context, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken[id] {
		return 0, errors.New("unreachable")
	}
	return f.queue[id], nil
}

func (f *fakeAdmission) EnsureDraw(_ context.Context, id string) (seckill.DrawRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := seckill.DrawRecord{SaleID: id}
	if f.drawn[id] {
		rec.DrawnAt = time.Unix(1, 0)
	}
	return rec, nil
}

// TestAdmissionMetricsFollowTheSales scrapes the collector as a lottery
// fills, closes and is drawn, and as a queue fills and is admitted: every
// value moves as the sale does.
func TestAdmissionMetricsFollowTheSales(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)
	lottery := &seckill.Sale{ID: "lot", StartAt: t0, EndAt: t0.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(10 * time.Minute)}}
	queue := &seckill.Sale{ID: "q", StartAt: t0, EndAt: t0.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 4}}
	firstCome := &seckill.Sale{ID: "fc", StartAt: t0, EndAt: t0.Add(time.Hour)}
	f := &fakeAdmission{sales: []*seckill.Sale{lottery, queue, firstCome},
		entrants: map[string]int64{}, queue: map[string]int64{}, drawn: map[string]bool{}, broken: map[string]bool{}}
	var mu sync.Mutex
	now := t0.Add(-time.Minute)
	at := func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() }
	c := NewAdmissionCollector(AdmissionConfig{Sales: f, Entrants: f, Queue: f, Draws: f,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	want := func(step string, lines ...string) {
		t.Helper()
		got, err := reg.Gather()
		if err != nil {
			t.Fatalf("%s: gather: %v", step, err)
		}
		values := map[string]float64{}
		for _, mf := range got {
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				values[mf.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = v
			}
		}
		wantValues := map[string]float64{}
		for _, l := range lines {
			name, v, _ := strings.Cut(l, " ")
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("bad want line %q", l)
			}
			wantValues[name] = x
		}
		for k, v := range wantValues {
			if g, ok := values[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", step, k, g, ok, v)
			}
		}
		for k := range values {
			if _, ok := wantValues[k]; !ok {
				t.Errorf("%s: unexpected %s = %v", step, k, values[k])
			}
		}
	}

	want("before the start: nobody yet",
		"seckill_lottery_entrants{lot} 0", "seckill_lottery_draw_waiting_seconds{lot} 0",
		"seckill_queue_length{q} 0", "seckill_queue_admitted_total{q} 0", "seckill_queue_admit_rate{q} 0")

	f.mu.Lock()
	f.entrants["lot"], f.queue["q"] = 120, 30
	f.mu.Unlock()
	at(2500 * time.Millisecond)
	want("2.5 s in: 4 a second admitted, positions 1 to 11",
		"seckill_lottery_entrants{lot} 120", "seckill_lottery_draw_waiting_seconds{lot} 0",
		"seckill_queue_length{q} 30", "seckill_queue_admitted_total{q} 11", "seckill_queue_admit_rate{q} 4")

	at(12 * time.Minute)
	want("entries closed 2 min ago, not drawn; the queue admitted to its end",
		"seckill_lottery_entrants{lot} 120", "seckill_lottery_draw_waiting_seconds{lot} 120",
		"seckill_queue_length{q} 30", "seckill_queue_admitted_total{q} 30", "seckill_queue_admit_rate{q} 4")

	f.mu.Lock()
	f.drawn["lot"], f.queue["q"] = true, 31
	f.broken["fc"] = true // not read at all: first come has none of these
	f.mu.Unlock()
	want("drawn; a late joiner admitted at once",
		"seckill_lottery_entrants{lot} 120", "seckill_lottery_draw_waiting_seconds{lot} 0",
		"seckill_queue_length{q} 31", "seckill_queue_admitted_total{q} 31", "seckill_queue_admit_rate{q} 4")

	f.mu.Lock()
	f.broken["q"] = true
	f.mu.Unlock()
	want("an unreadable sale is left out, the scrape goes on",
		"seckill_lottery_entrants{lot} 120", "seckill_lottery_draw_waiting_seconds{lot} 0")

}

// TestDrawsCountAndTime: each finished draw is counted and timed.
func TestDrawsCountAndTime(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d := NewDraws(reg)
	d.ObserveDraw("s1", 100, 10, 300*time.Millisecond)
	d.ObserveDraw("s2", 5, 5, 20*time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			var under []string
			for _, b := range h.GetBucket() {
				under = append(under, strconv.FormatUint(b.GetCumulativeCount(), 10))
			}
			got[mf.GetName()] = fmt.Sprintf("count %d sum %.2f buckets %s", h.GetSampleCount(), h.GetSampleSum(), strings.Join(under, " "))
		} else {
			got[mf.GetName()] = strconv.FormatFloat(m.GetCounter().GetValue(), 'f', -1, 64)
		}
	}
	for name, want := range map[string]string{
		"seckill_lottery_draws_total":           "2",
		"seckill_lottery_draw_duration_seconds": "count 2 sum 0.32 buckets 0 1 1 2 2 2 2 2",
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
}

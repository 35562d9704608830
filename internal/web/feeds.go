package web

import (
	"sync"

	"github.com/seckill-dev/seckill"
)

// MaxBuyerFeeds is how many live feeds (GET /sales/{id}/events) one buyer
// may hold open on a node at once: tabs and devices. A feed reads the
// buyer's standing through the API every interval for as long as it is
// open, and holding one open costs its client nothing, so without a cap a
// client could open thousands and have the backends read for each of them
// every two seconds. Past it the feed is refused 429; the page then polls
// the standing (GET /sales/{id}/standing), one read a request it sends.
const MaxBuyerFeeds = 8

var errTooManyFeeds = seckill.Errorf(seckill.ERATELIMITED,
	"Too many live pages of yours are open; close one, or this page checks every few seconds instead.")

// feedCounts counts the open feeds of each buyer.
type feedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// open counts a feed of user unless they hold MaxBuyerFeeds already.
func (c *feedCounts) open(user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user] >= MaxBuyerFeeds {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[user]++
	return true
}

// close uncounts a feed open counted.
func (c *feedCounts) close(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[user]--; c.n[user] <= 0 {
		delete(c.n, user)
	}
}

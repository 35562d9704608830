package redistest

import (
	"context"

	"github.com/redis/rueidis"
)

// DeletePrefix unlinks every key under prefix+":" on the Redis at url
// (on every master of a Cluster): a test removes what it wrote, and the
// shared Redis is never flushed.
func DeletePrefix(url, prefix string) error {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			for _, k := range e.Elements {
				// Through the top client, which routes each key to its slot.
				if err := c.Do(ctx, c.B().Unlink().Key(k).Build()).Error(); err != nil {
					return err
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

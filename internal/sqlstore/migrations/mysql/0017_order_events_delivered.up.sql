-- Retention of delivered order events (EventStore.PruneDelivered): the
-- delivered events oldest first, so that each batch deleted is a range of
-- this index, not a scan of the outbox. MySQL has no partial index: the
-- state comes first, and a pending event's entry (state, NULL) sits apart
-- from the delivered range. InnoDB adds the index online, without holding
-- back inserts.
ALTER TABLE order_events ADD INDEX order_events_delivered_idx (state, delivered_at_ms);

-- Retention of delivered order events (EventStore.PruneDelivered): the
-- delivered events oldest first, so that each batch deleted is a range of
-- this index, not a scan of the outbox. Partial: a pending or dead event
-- is never in it, so inserting an event costs no more. state leads,
-- constant as it is, so that the planner rates it above
-- order_events_due_idx (state, next_at_ms) for the prune's select.
CREATE INDEX order_events_delivered_idx ON order_events (state, delivered_at_ms) WHERE state = 'delivered';

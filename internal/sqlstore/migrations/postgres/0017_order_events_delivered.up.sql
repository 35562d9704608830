-- Retention of delivered order events (EventStore.PruneDelivered): the
-- delivered events oldest first, so that each batch deleted is a range of
-- this index, not a scan of the outbox. Partial: a pending or dead event
-- is never in it, so inserting an event costs no more; seq makes the
-- batch's select index-only.
--
-- Not CONCURRENTLY (a migration runs in a transaction): the build holds
-- back writes to order_events while it reads the table. Migrate outside a
-- sale.
CREATE INDEX order_events_delivered_idx ON order_events (delivered_at_ms, seq) WHERE state = 'delivered';

-- Retention of delivered order events (EventStore.PruneDelivered): the
-- delivered events oldest first, so that each batch deleted is a range of
-- this index, not a scan of the outbox. Partial: a pending or dead event
-- is never in it, so inserting an event costs no more; seq makes the
-- batch's select index-only.
--
-- Built CONCURRENTLY, so outside a transaction: the order writer's
-- transactions, which insert events, go on while it reads the table. The
-- drop makes the build safe to repeat (noTxMarker in migrate.go).
-- seckill:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS order_events_delivered_idx;
CREATE INDEX CONCURRENTLY order_events_delivered_idx ON order_events (delivered_at_ms, seq) WHERE state = 'delivered';

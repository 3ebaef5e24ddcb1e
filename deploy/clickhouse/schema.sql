-- memprofd's fleet schema (FLEET_SCHEMA_VERSION in fleet/fleet.h): run every statement
-- on every node of the cluster (local-cluster.sh does). Each X_local table holds one
-- shard's rows; X is a Distributed table over the cluster `memprofd` (rename it to yours).
-- Sharding: MIB rows and contexts by cityHash64(bin_key, stack_hash), so all of one
-- context's rows, from every host, meet on one shard and its MemInfoBlock is combined
-- there (GROUP BY over the Distributed table still merges partial states exactly:
-- sums, mins, maxes, argMax and sumForEach all combine across shards); frames by
-- (binary, offset), data symbols by (binary, symbol, address), the ledger and runs by
-- host. Plain MergeTree: rows are never replaced in place; a push's rows count only once
-- its ledger rows exist (see fleet/cmd_push.c). Statements end with ';' at a line's end.
CREATE DATABASE IF NOT EXISTS memprofd;
-- schema_version: the memprofd fleet schema these tables follow (fleet/fleet.h).
CREATE TABLE IF NOT EXISTS memprofd.meta_local (key String, value UInt64)
    ENGINE = MergeTree ORDER BY key;
CREATE TABLE IF NOT EXISTS memprofd.meta AS memprofd.meta_local
    ENGINE = Distributed(memprofd, memprofd, meta_local, cityHash64(key));
-- The push ledger: one row per (host, run) a push completed, written after all of the
-- push's rows are on every shard. Readers see only rows of pushes listed here.
CREATE TABLE IF NOT EXISTS memprofd.pushes_local (host String, push_id UInt64, run_id Int64, mark UInt64, rows UInt64)
    ENGINE = MergeTree ORDER BY (host, run_id, push_id);
CREATE TABLE IF NOT EXISTS memprofd.pushes AS memprofd.pushes_local
    ENGINE = Distributed(memprofd, memprofd, pushes_local, cityHash64(host));
-- Runs (facts: one row per push of the run); alloc_mode: exact|sampled|off, for the
-- evidence rule (reporter/classify.c: a sampled run's expected samples at the hot threshold).
CREATE TABLE IF NOT EXISTS memprofd.runs_local (host String, push_id UInt64, run_id Int64, command String, started_ns Int64, ended_ns Int64, status String, alloc_mode String)
    ENGINE = MergeTree ORDER BY (host, run_id, push_id);
CREATE TABLE IF NOT EXISTS memprofd.runs AS memprofd.runs_local
    ENGINE = Distributed(memprofd, memprofd, runs_local, cityHash64(host));
-- Dimension tables: a full snapshot of the host's store with every push that sends
-- anything. bin_key: the build-id, or 'path:' and the path for a binary without one.
CREATE TABLE IF NOT EXISTS memprofd.binaries_local (host String, push_id UInt64, src_id Int64, bin_key String, build_id String, path String)
    ENGINE = MergeTree ORDER BY (bin_key, host, push_id);
CREATE TABLE IF NOT EXISTS memprofd.binaries AS memprofd.binaries_local
    ENGINE = Distributed(memprofd, memprofd, binaries_local, cityHash64(bin_key));
CREATE TABLE IF NOT EXISTS memprofd.processes_local (host String, push_id UInt64, src_id Int64, run_id Int64, pid Int32, start_ns Int64, bin_key String)
    ENGINE = MergeTree ORDER BY (bin_key, host, push_id, src_id);
CREATE TABLE IF NOT EXISTS memprofd.processes AS memprofd.processes_local
    ENGINE = Distributed(memprofd, memprofd, processes_local, cityHash64(host));
-- An allocation context: (executable, stack hash); its frames leaf first as (binary, offset);
-- has_density, min/max_(lifetime_)access_density_bits: per-object density extremes (store
-- schema >= 12, NULL there when unknown: has_density 0 and the values 0 here), as the IEEE-754
-- bits of the non-negative doubles: exact through TSV, and min/max of the bits order as the
-- values do.
-- watch_hits, watch_ns (mib): hardware-watch traps and watched granule-nanoseconds behind the
-- row's estimate (store schema >= 13, 0 before), the evidence rule's per-context input.
-- access_est_err (mib): the soft source's stall-factor share of the estimate's error, in
-- accesses (store schema >= 16, 0 before); rows add it, as the store's queries do.
-- total_access_bytes (mib): bytes read or written by the estimated accesses (store schema
-- >= 17, 0 before: unknown).
-- truncated: the stack was cut before its outermost frame (store schema >= 10).
CREATE TABLE IF NOT EXISTS memprofd.contexts_local (host String, push_id UInt64, src_id Int64, bin_key String, stack_hash Int64, f_bin Array(String), f_off Array(UInt64), truncated UInt8)
    ENGINE = MergeTree ORDER BY (bin_key, stack_hash, host, push_id);
CREATE TABLE IF NOT EXISTS memprofd.contexts AS memprofd.contexts_local
    ENGINE = Distributed(memprofd, memprofd, contexts_local, cityHash64(bin_key, stack_hash));
-- A frame and its DWARF inline chain (l_*: leaf first); has_*: the value is known (SQL NULL otherwise).
CREATE TABLE IF NOT EXISTS memprofd.frames_local (host String, push_id UInt64, bin_key String, offset UInt64, has_function UInt8, function String, has_mangled UInt8, mangled String, l_function Array(String), l_has_function Array(UInt8), l_mangled Array(String), l_has_mangled Array(UInt8), l_file Array(String), l_has_file Array(UInt8), l_line Array(UInt32), l_col Array(UInt32), l_decl Array(UInt32), l_inlined Array(UInt8))
    ENGINE = MergeTree ORDER BY (bin_key, offset, host, push_id);
CREATE TABLE IF NOT EXISTS memprofd.frames AS memprofd.frames_local
    ENGINE = Distributed(memprofd, memprofd, frames_local, cityHash64(bin_key, offset));
-- MemInfoBlock rows (facts), as the store keeps them; hist: the AccessHistogram.
CREATE TABLE IF NOT EXISTS memprofd.mib_local (host String, push_id UInt64, run_id Int64, bin_key String, stack_hash Int64, proc_id Int64, bucket_start Int64, alloc_count UInt64, total_size UInt64, min_size UInt64, max_size UInt64, total_lifetime_ns UInt64, min_lifetime_ns UInt64, max_lifetime_ns UInt64, alloc_ts_ns UInt64, dealloc_ts_ns UInt64, alloc_cpu UInt64, dealloc_cpu UInt64, num_migrated_cpu UInt64, num_lifetime_overlaps UInt64, num_same_alloc_cpu UInt64, num_same_dealloc_cpu UInt64, access_samples UInt64, total_access_count UInt64, min_access_count UInt64, max_access_count UInt64, alloc_samples UInt64, live_at_exit_count UInt64, live_at_exit_bytes UInt64, live_at_exit_lifetime_ns UInt64, hist Array(UInt64), has_density UInt8, min_access_density_bits UInt64, max_access_density_bits UInt64, min_lifetime_access_density_bits UInt64, max_lifetime_access_density_bits UInt64, watch_hits UInt64, watch_ns UInt64, access_est_err UInt64, total_access_bytes UInt64)
    ENGINE = MergeTree ORDER BY (bin_key, stack_hash, host, run_id, push_id, proc_id, bucket_start);
CREATE TABLE IF NOT EXISTS memprofd.mib AS memprofd.mib_local
    ENGINE = Distributed(memprofd, memprofd, mib_local, cityHash64(bin_key, stack_hash));
-- Static data symbols' accesses per run (facts), with the run's start and end.
CREATE TABLE IF NOT EXISTS memprofd.data_local (host String, push_id UInt64, run_id Int64, bin_key String, symbol String, address UInt64, has_section UInt8, section String, size UInt64, access_samples UInt64, est_accesses UInt64, run_started Int64, run_ended Int64)
    ENGINE = MergeTree ORDER BY (bin_key, symbol, address, host, run_id, push_id);
CREATE TABLE IF NOT EXISTS memprofd.data AS memprofd.data_local
    ENGINE = Distributed(memprofd, memprofd, data_local, cityHash64(bin_key, symbol, address));
-- Access samples per run and class (facts; store schema >= 4), the evidence rule's weight.
CREATE TABLE IF NOT EXISTS memprofd.access_classes_local (host String, push_id UInt64, run_id Int64, class String, samples UInt64, est_accesses UInt64)
    ENGINE = MergeTree ORDER BY (host, run_id, push_id, class);
CREATE TABLE IF NOT EXISTS memprofd.access_classes AS memprofd.access_classes_local
    ENGINE = Distributed(memprofd, memprofd, access_classes_local, cityHash64(host));
-- This node's version row (readers take the largest over the cluster).
INSERT INTO memprofd.meta_local SELECT 'schema_version', 7 WHERE (SELECT count() FROM memprofd.meta_local WHERE key = 'schema_version') = 0;

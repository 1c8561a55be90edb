// Package values is the values store: the one owner of the values' physical layout
// (docs/storage.md). It holds
//
//   - rows of "values" and their writes: the batch upsert with lastValue/lastActivity
//     (write.go), range deletes, the range replace of computed values (replace.go), a
//     history import's rows through a staging table (staged.go, tally.go, copyrows.go),
//     its minute tiles built beside its upsert on a second connection (tiler.go);
//   - packed days in values_packed: packing, the packer loop, unpacking before a write
//     (packed.go, pack.go);
//   - the rollup tiles of every tier: kept by each write, rebuilt, retiled, caught up
//     behind the rollup mark (tiers.go, rollupmark.go, rebuild.go, retile.go);
//   - last values and their notification payload (lastvalue.go);
//   - the lookups others need: pages of values, the newest value, values after a time,
//     one statistic (read.go), and the storage report (report.go).
//
// Nothing else writes these tables or names them, except the compiler (querybuilder/,
// which emits reads over both layouts and the tiers) and the migrations (sql/).
package values

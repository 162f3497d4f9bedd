use super::*;
use crate::format::testing::*;
use crate::format::{Writer, finish_header};
use proptest::prelude::*;

fn sample() -> Manifest {
    let mut m = Manifest::new(128, crate::Metric::L2, Some("s3://bucket/prefix".into()));
    let mut flushed = SegmentMeta::growing(SegmentId(1), 10);
    flushed.rows = 1000;
    flushed.deleted_rows = 3;
    flushed.seal(SealReason::Rows { rows: 1000, max_rows: 1000 }, 11).unwrap();
    flushed.start_flush().unwrap();
    flushed.flushed(516_000, 12).unwrap();
    flushed.set_index_state(IndexState::Building).unwrap();
    m.segments.push(SegmentEntry {
        meta: flushed,
        insert_binlog: Some(ObjectRef::of("i/1/seg/1/insert", b"abc")),
        index_file: None,
        delta_binlogs: vec![ObjectRef::of("i/1/seg/1/delta-1", b"d")],
        pending_tombstones: RowRuns::default(),
        keys: None,
        scalar_binlog: None,
    });
    m.segments.push(SegmentEntry::new(SegmentMeta::growing(SegmentId(2), 12)));
    m.next_segment_id = 3;
    m.generation = 7;
    m
}

/// An object as versions 1 to 3 wrote it.
#[derive(Serialize)]
struct OldRef<'a> {
    key: &'a str,
    size: u64,
    crc32c: u32,
}

fn old_ref(o: &ObjectRef) -> OldRef<'_> {
    assert_eq!(o.pages, None, "older versions know no pages");
    OldRef { key: &o.key, size: o.size, crc32c: o.crc32c }
}

/// A segment's metadata as versions 1 to 4 wrote it: bincode writes a
/// struct as its fields in order, so the current fields but the last.
#[derive(Serialize)]
struct OldMeta<'a> {
    id: SegmentId,
    state: SegmentState,
    index_state: IndexState,
    rows: u64,
    deleted_rows: u64,
    bytes: u64,
    seal_reason: &'a Option<SealReason>,
    created_at: u64,
    sealed_at: Option<u64>,
    flushed_at: Option<u64>,
}

fn old_meta(m: &SegmentMeta) -> OldMeta<'_> {
    assert_eq!(m.dropped_at, None, "older versions know no drop time");
    let SegmentMeta { id, state, index_state, rows, deleted_rows, bytes, created_at, sealed_at, flushed_at, .. } = *m;
    let seal_reason = &m.seal_reason;
    OldMeta { id, state, index_state, rows, deleted_rows, bytes, seal_reason, created_at, sealed_at, flushed_at }
}

/// A segment as versions 1 and 2 wrote it.
#[derive(Serialize)]
struct OldEntry<'a> {
    meta: OldMeta<'a>,
    insert_binlog: Option<OldRef<'a>>,
    index_file: Option<OldRef<'a>>,
    delta_binlogs: Vec<OldRef<'a>>,
}

fn old_entries(m: &Manifest) -> Vec<OldEntry<'_>> {
    m.segments
        .iter()
        .map(|e| OldEntry {
            meta: old_meta(&e.meta),
            insert_binlog: e.insert_binlog.as_ref().map(old_ref),
            index_file: e.index_file.as_ref().map(old_ref),
            delta_binlogs: e.delta_binlogs.iter().map(old_ref).collect(),
        })
        .collect()
}

fn with_header(version: u16, body: &[u8]) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.bytes(MAGIC).u16(version).u16(0).u64(body.len() as u64).u32(crc32c::crc32c(body));
    let mut bytes = finish_header(w, HEADER_LEN);
    bytes.extend_from_slice(body);
    bytes
}

#[test]
fn the_generation_is_read_from_the_first_bytes_alone() {
    let mut m = sample();
    m.generation = 300_000;
    let bytes = m.encode();
    // A manifest's first page: its header and the start of its body.
    assert_eq!(Manifest::peek_generation(&bytes[..HEADER_LEN + 8]), Some(300_000));
    assert_eq!(Manifest::peek_generation(&bytes), Some(300_000));
    // Too short, not a manifest, or a version whose body starts otherwise.
    assert_eq!(Manifest::peek_generation(&bytes[..HEADER_LEN - 1]), None);
    assert_eq!(Manifest::peek_generation(&[7; 64]), None);
    let body = bincode::serde::encode_to_vec(&m, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::peek_generation(&with_header(5, &body)), None);
    assert_eq!(Manifest::peek_generation(&with_header(6, &body)), Some(300_000));
}

#[test]
fn reads_version_1_as_the_default_storage() {
    // A version 1 body is a version 2 body without its last field.
    #[derive(Serialize)]
    struct V1<'a> {
        generation: u64,
        next_segment_id: u64,
        dims: u32,
        metric: u8,
        segments: Vec<OldEntry<'a>>,
    }
    let m = sample();
    let v1 = V1 {
        generation: m.generation,
        next_segment_id: m.next_segment_id,
        dims: m.dims,
        metric: m.metric,
        segments: old_entries(&m),
    };
    let body = bincode::serde::encode_to_vec(&v1, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::decode("o", &with_header(1, &body)).unwrap(), Manifest { storage_url: None, ..m });
}

#[test]
fn reads_version_2_with_nothing_pending() {
    #[derive(Serialize)]
    struct V2<'a> {
        generation: u64,
        next_segment_id: u64,
        dims: u32,
        metric: u8,
        segments: Vec<OldEntry<'a>>,
        storage_url: &'a Option<String>,
    }
    let m = sample();
    let v2 = V2 {
        generation: m.generation,
        next_segment_id: m.next_segment_id,
        dims: m.dims,
        metric: m.metric,
        segments: old_entries(&m),
        storage_url: &m.storage_url,
    };
    let body = bincode::serde::encode_to_vec(&v2, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::decode("o", &with_header(2, &body)).unwrap(), m);
}

#[test]
fn reads_version_3_with_no_object_in_pages() {
    #[derive(Serialize)]
    struct V3<'a> {
        generation: u64,
        next_segment_id: u64,
        dims: u32,
        metric: u8,
        segments: Vec<(OldEntry<'a>, &'a RowRuns)>,
        storage_url: &'a Option<String>,
    }
    let mut m = sample();
    m.add_pending_tombstones(SegmentId(1), &[4, 5]).unwrap();
    // bincode writes a struct as its fields in order, as it writes a
    // tuple: an old entry then its pending rows is a version 3 entry.
    let v3 = V3 {
        generation: m.generation,
        next_segment_id: m.next_segment_id,
        dims: m.dims,
        metric: m.metric,
        segments: old_entries(&m).into_iter().zip(m.segments.iter().map(|e| &e.pending_tombstones)).collect(),
        storage_url: &m.storage_url,
    };
    let body = bincode::serde::encode_to_vec(&v3, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::decode("o", &with_header(3, &body)).unwrap(), m);
}

#[test]
fn reads_version_4_with_no_drop_time() {
    #[derive(Serialize)]
    struct V4Entry<'a> {
        meta: OldMeta<'a>,
        insert_binlog: &'a Option<ObjectRef>,
        index_file: &'a Option<ObjectRef>,
        delta_binlogs: &'a Vec<ObjectRef>,
        pending_tombstones: &'a RowRuns,
    }
    #[derive(Serialize)]
    struct V4<'a> {
        generation: u64,
        next_segment_id: u64,
        dims: u32,
        metric: u8,
        segments: Vec<V4Entry<'a>>,
        storage_url: &'a Option<String>,
    }
    let mut m = sample();
    m.segments[0].insert_binlog.as_mut().unwrap().pages = Some(17);
    let v4 = V4 {
        generation: m.generation,
        next_segment_id: m.next_segment_id,
        dims: m.dims,
        metric: m.metric,
        segments: m
            .segments
            .iter()
            .map(|e| V4Entry {
                meta: old_meta(&e.meta),
                insert_binlog: &e.insert_binlog,
                index_file: &e.index_file,
                delta_binlogs: &e.delta_binlogs,
                pending_tombstones: &e.pending_tombstones,
            })
            .collect(),
        storage_url: &m.storage_url,
    };
    let body = bincode::serde::encode_to_vec(&v4, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::decode("o", &with_header(4, &body)).unwrap(), m);
}

#[test]
fn reads_version_5_with_no_filter_columns() {
    #[derive(Serialize)]
    struct V5Entry<'a> {
        meta: &'a SegmentMeta,
        insert_binlog: &'a Option<ObjectRef>,
        index_file: &'a Option<ObjectRef>,
        delta_binlogs: &'a Vec<ObjectRef>,
        pending_tombstones: &'a RowRuns,
        keys: &'a Option<ObjectRef>,
    }
    #[derive(Serialize)]
    struct V5<'a> {
        generation: u64,
        next_segment_id: u64,
        dims: u32,
        metric: u8,
        segments: Vec<V5Entry<'a>>,
        storage_url: &'a Option<String>,
    }
    let mut m = sample();
    m.segments[0].keys = Some(ObjectRef::of("keys of 1", b"k"));
    let v5 = V5 {
        generation: m.generation,
        next_segment_id: m.next_segment_id,
        dims: m.dims,
        metric: m.metric,
        segments: m
            .segments
            .iter()
            .map(|e| V5Entry {
                meta: &e.meta,
                insert_binlog: &e.insert_binlog,
                index_file: &e.index_file,
                delta_binlogs: &e.delta_binlogs,
                pending_tombstones: &e.pending_tombstones,
                keys: &e.keys,
            })
            .collect(),
        storage_url: &m.storage_url,
    };
    let body = bincode::serde::encode_to_vec(&v5, bincode::config::standard()).unwrap();
    assert_eq!(Manifest::decode("o", &with_header(5, &body)).unwrap(), m);
    // Version 6 keeps a segment's scalar binlog, among its objects.
    m.segments[0].scalar_binlog = Some(ObjectRef::of("i/1/seg/1/scalar", b"s"));
    let decoded = Manifest::decode("o", &m.encode()).unwrap();
    assert_eq!(decoded, m);
    assert!(decoded.referenced_keys().any(|k| k == "i/1/seg/1/scalar"));
}

#[test]
fn a_dropped_segment_is_kept_for_the_grace_period_from_its_drop() {
    let grace = std::time::Duration::from_secs(100);
    let mut m = sample();
    let (old, new) = (SegmentId(1), m.allocate_segment_id());
    let out = Flushed {
        segment: new,
        rows: 9,
        insert_binlog: ObjectRef::of("i/3", b"x"),
        index_file: None,
        bytes: 1,
        row_keys: vec![],
        keys: None,
        scalar_binlog: None,
    };
    // Objects made long ago, dropped at 1000: kept until 1100.
    m.publish_compaction(&[old], vec![out], false, 1000).unwrap();
    assert_eq!(m.segment(old).unwrap().meta.dropped_at, Some(1000));
    let all = ["i/1/seg/1/insert", "i/1/seg/1/delta-1", "i/3"];
    assert_eq!(m.kept_keys(1000, grace).collect::<Vec<_>>(), all);
    assert_eq!(m.kept_keys(1099, grace).collect::<Vec<_>>(), all);
    assert_eq!(m.kept_keys(1100, grace).collect::<Vec<_>>(), ["i/3"]);
    assert_eq!(m.kept_keys(1000, std::time::Duration::ZERO).collect::<Vec<_>>(), ["i/3"], "no grace");
    assert_eq!(m.kept_keys(900, grace).count(), 3, "a clock set back keeps, never loses");
    assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "the drop time round-trips");
    // Dropped under version 4 (no time): its objects age in storage.
    m.segments[0].meta.dropped_at = None;
    assert_eq!(m.kept_keys(1000, grace).collect::<Vec<_>>(), ["i/3"]);
}

#[test]
fn a_segments_keys_in_pages_are_a_chain_not_an_object() {
    let mut m = sample();
    let mut keys = ObjectRef::of("keys of segment 1", &7u64.to_le_bytes());
    keys.pages = Some(30);
    let generation = m.generation;
    m.set_keys(SegmentId(1), keys.clone()).unwrap();
    assert_eq!((m.segments[0].keys.as_ref(), m.generation), (Some(&keys), generation + 1));
    assert!(m.set_keys(SegmentId(2), keys.clone()).is_err(), "a growing segment has no keys in pages");
    assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "round-trips");
    assert!(m.objects().all(|o| o.key != keys.key), "not the store's: never collected, verified or adopted");
    assert!(m.kept_keys(0, std::time::Duration::ZERO).all(|k| k != keys.key));
    assert_eq!(m.chains().filter_map(|c| c.pages).collect::<Vec<_>>(), [30], "but its pages are accounted");
}

#[test]
fn objects_keep_their_pages_across_a_round_trip() {
    let mut m = sample();
    m.segments[0].insert_binlog.as_mut().unwrap().pages = Some(17);
    let back = Manifest::decode("o", &m.encode()).unwrap();
    assert_eq!(back.segments[0].insert_binlog.as_ref().unwrap().pages, Some(17));
    assert_eq!(back.segments[0].delta_binlogs[0].pages, None);
    let mut m = sample();
    let unpaged: Vec<String> = m.unpaged_objects().into_iter().map(|o| o.key).collect();
    assert_eq!(unpaged, ["i/1/seg/1/insert", "i/1/seg/1/delta-1"]);
    let paged = std::collections::HashMap::from([("i/1/seg/1/delta-1".to_owned(), 40)]);
    assert_eq!((m.set_pages(&paged), m.set_pages(&paged)), (1, 0), "set once");
    assert_eq!(m.segments[0].delta_binlogs[0].pages, Some(40));
    let (a, b) = (ObjectRef::of("k/1", b"same"), ObjectRef::of("k/2", b"same"));
    assert_eq!(a.page_tag(), b.page_tag(), "a copy under another key keeps its pages");
    assert_ne!(a.page_tag(), ObjectRef::of("k/1", b"other").page_tag());
}

#[test]
fn pending_tombstones_are_counted_once_and_settle_into_a_delta_binlog() {
    let mut m = sample();
    let id = SegmentId(1);
    m.add_pending_tombstones(id, &[5, 9]).unwrap();
    m.add_pending_tombstones(id, &[11]).unwrap();
    let e = m.segment(id).unwrap();
    assert_eq!((e.meta.deleted_rows, e.tombstone_version()), (6, (1, 3)));
    assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m, "pending tombstones round-trip");
    // A job wrote 5 and 9; 11 came meanwhile and stays pending.
    m.settle_tombstones(id, ObjectRef::of("i/1/seg/1/delta-2", b"e"), &[5, 9]).unwrap();
    let e = m.segment(id).unwrap();
    let pending: Vec<u32> = e.pending_tombstones.iter().collect();
    assert_eq!((e.meta.deleted_rows, pending, e.tombstone_version()), (6, vec![11], (2, 1)));
    assert!(m.referenced_keys().any(|k| k == "i/1/seg/1/delta-2"));
}

#[test]
fn neighbouring_rows_take_one_run() {
    let runs = RowRuns::of([7, 3, 4, 5, 5, 9, 8, 20]);
    assert_eq!((runs.len(), runs.runs()), (7, 3));
    assert_eq!(runs.iter().collect::<Vec<_>>(), [3, 4, 5, 7, 8, 9, 20]);
    let all = RowRuns::of(0..100_000);
    assert_eq!((all.len(), all.runs()), (100_000, 1));
    let mut r = RowRuns::of([1, 2, 3]);
    r.add(&[4, 10]);
    r.remove(&[2]);
    assert_eq!(r.iter().collect::<Vec<_>>(), [1, 3, 4, 10]);
    let last = RowRuns::of([u32::MAX - 1, u32::MAX]);
    assert_eq!((last.runs(), last.iter().collect::<Vec<_>>()), (1, vec![u32::MAX - 1, u32::MAX]));
}

#[test]
fn round_trip() {
    let m = sample();
    assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m);
    assert_eq!(m.referenced_keys().collect::<Vec<_>>(), ["i/1/seg/1/insert", "i/1/seg/1/delta-1"]);
    assert_eq!(m.live_segments().count(), 2);
}

#[test]
fn changes_follow_the_lifecycle_and_bump_the_generation() {
    let mut m = Manifest::new(4, crate::Metric::L2, None);
    let a = m.add_growing(1);
    m.seal(a, 10, SealReason::Manual, 2).unwrap();
    let flushed = |segment, rows| Flushed {
        segment,
        rows,
        insert_binlog: ObjectRef::of(format!("i/{segment}"), b"x"),
        index_file: Some(ObjectRef::of(format!("h/{segment}"), b"y")),
        bytes: 2,
        row_keys: vec![],
        keys: None,
        scalar_binlog: None,
    };
    m.publish_flush(flushed(a, 10), 3).unwrap();
    assert_eq!(
        (m.segment(a).unwrap().meta.state, m.segment(a).unwrap().meta.index_state),
        (SegmentState::Flushed, IndexState::Ready)
    );
    m.add_tombstones(a, ObjectRef::of("d/1", b"z"), 4).unwrap();
    let out = m.allocate_segment_id();
    m.publish_compaction(&[a], vec![flushed(out, 6)], false, 4).unwrap();
    assert_eq!(m.segment(a).unwrap().meta.state, SegmentState::Dropped);
    assert_eq!(m.segment(out).unwrap().meta.seal_reason.as_ref().unwrap().to_string(), "compaction of [1]");
    assert_eq!(m.referenced_keys().collect::<Vec<_>>(), [format!("i/{out}"), format!("h/{out}")]);
    assert_eq!(m.generation, 6);
    assert_eq!(
        m.publish_flush(flushed(a, 1), 5).unwrap_err().to_string(),
        "segment 1: illegal state change dropped -> flushed"
    );
    assert_eq!(
        m.seal(SegmentId(99), 1, SealReason::Manual, 5).unwrap_err(),
        ManifestError::UnknownSegment(SegmentId(99))
    );
    // A dropped segment leaves the manifest once all its objects are gone.
    assert_eq!(m.forget_dropped(|_| false), 0, "objects still there: kept");
    assert_eq!(m.forget_dropped(|k| k == format!("i/{a}")), 0, "one of three objects gone: kept");
    let gone = [format!("i/{a}"), format!("h/{a}"), "d/1".to_owned()];
    assert_eq!(m.forget_dropped(|k| gone.iter().any(|g| g == k)), 1);
    assert!(m.segment(a).is_none() && m.segment(out).is_some());
}

#[test]
fn a_built_segment_is_flushed_beside_the_empty_growing_one() {
    let mut m = Manifest::new(4, crate::Metric::L2, None);
    let growing = m.add_growing(1);
    let built = m.allocate_segment_id();
    let insert_binlog = ObjectRef::of(format!("i/{built}"), b"x");
    let index_file = Some(ObjectRef::of(format!("h/{built}"), b"y"));
    let flushed = Flushed {
        segment: built,
        rows: 500,
        insert_binlog,
        index_file,
        bytes: 2,
        row_keys: vec![],
        keys: None,
        scalar_binlog: None,
    };
    m.publish_built(flushed, 2).unwrap();
    let entry = m.segment(built).unwrap();
    assert_eq!((entry.meta.state, entry.meta.index_state), (SegmentState::Flushed, IndexState::Ready));
    assert_eq!((entry.meta.rows, entry.meta.seal_reason.as_ref().unwrap().to_string()), (500, "index build".into()));
    assert_eq!(m.segment(growing).unwrap().meta.state, SegmentState::Growing);
    assert_eq!(m.flushed_segments().map(|e| e.meta.id).collect::<Vec<_>>(), [built]);
    assert_eq!(m.referenced_keys().collect::<Vec<_>>(), [format!("i/{built}"), format!("h/{built}")]);
    assert_eq!(Manifest::decode("o", &m.encode()).unwrap(), m);
}

#[test]
fn corruption_is_refused() {
    let bytes = sample().encode();
    every_bit_flip_is_refused(&bytes, |b| Manifest::decode("o", b).map(drop));
    every_truncation_is_refused(&bytes, |b| Manifest::decode("o", b).map(drop));
}

#[test]
fn a_body_with_a_valid_checksum_but_garbage_is_an_error() {
    let garbage = vec![0xffu8; 16];
    let mut w = Writer(Vec::new());
    w.bytes(MAGIC).u16(VERSION).u16(0).u64(garbage.len() as u64).u32(crc32c::crc32c(&garbage));
    let mut bytes = finish_header(w, HEADER_LEN);
    bytes.extend_from_slice(&garbage);
    let e = Manifest::decode("meta", &bytes).unwrap_err();
    assert!(e.to_string().starts_with("object meta: manifest body: "), "{e}");
}

proptest! {
    #[test]
    fn decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Manifest::decode("o", &bytes);
    }

    #[test]
    fn decoder_never_panics_on_checksummed_garbage(body in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut w = Writer(Vec::new());
        w.bytes(MAGIC).u16(VERSION).u16(0).u64(body.len() as u64).u32(crc32c::crc32c(&body));
        let mut bytes = finish_header(w, HEADER_LEN);
        bytes.extend_from_slice(&body);
        let _ = Manifest::decode("o", &bytes);
    }
}

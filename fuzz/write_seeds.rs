//! Writes a seed corpus of valid encodings into `seeds/<target>/`, so the
//! fuzzer starts past the headers and checksums.
use std::sync::atomic::AtomicBool;

use milvus_core::Metric;
use milvus_core::element::{Row, Vectors, f16};
use milvus_core::format::manifest::Manifest;
use milvus_core::format::{delta, index, insert, ranges};
use milvus_core::graph::FlatGraph;
use milvus_core::quant::{Codes, Quantization};
use milvus_core::segment::SegmentId;

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn main() {
    for (i, text) in ["[1,2,3]", "[ -1.5e-3 , 2.25,3e+2]", "[0]", "[1,2", "[NaN]", "[1,,2]"].iter().enumerate() {
        write("vector_text", &format!("seed-{i}"), text.as_bytes());
    }
    for (i, text) in ["{1:1.5,3:-2}/5", " { 2 : 1e-3 , 1 : 0 } / 3 ", "{}/1", "{1:1,1:2}/3"].iter().enumerate() {
        write("vector_text", &format!("sparse-{i}"), text.as_bytes());
    }
    let sparse = milvus_core::sparse::parse("{2:1.5,5:-3}/6", None).unwrap();
    write("vector_binary", "sparse-0", &milvus_core::sparse::encode_binary(sparse.view()));
    let mut binary = 3i16.to_be_bytes().to_vec();
    binary.extend(0i16.to_be_bytes());
    for v in [1.0f32, -2.5, 3.25] {
        binary.extend(v.to_be_bytes());
    }
    write("vector_binary", "seed-0", &binary);
    let keys: Vec<u64> = (0..4).collect();
    let vectors: Vec<f32> = (0..12).map(|i| i as f32 / 3.0).collect();
    write("insert_binlog", "seed-0", &insert::encode(SegmentId(7), Metric::L2, 3, &keys, &vectors));
    write("insert_binlog", "seed-1", &insert::encode(SegmentId(1), Metric::Cosine, 1, &[], Row::F32(&[])));
    let halves: Vec<f16> = vectors.iter().map(|v| f16::from_f32(*v)).collect();
    write("insert_binlog", "seed-2", &insert::encode(SegmentId(7), Metric::L1, 3, &keys, Row::F16(&halves)));
    let bits = [0b1010_0000u8, 0b0110_0000, 0b1110_0000, 0];
    write(
        "insert_binlog",
        "seed-3",
        &insert::encode(SegmentId(7), Metric::Hamming, 3, &keys, Row::Bit { bits: &bits, len: 32 }),
    );
    let mut sparse_rows = Vectors::new(milvus_core::element::Element::Sparse);
    for row in milvus_core::synthetic::splade_like(4, 64, 5, 2) {
        sparse_rows.push(Row::Sparse(&milvus_core::element::sparse_words(row.view())));
    }
    write(
        "insert_binlog",
        "sparse-0",
        &insert::encode_vectors(SegmentId(7), Metric::InnerProduct, 64, &keys, &sparse_rows),
    );
    let binlog = insert::encode(SegmentId(7), Metric::L2, 3, &keys, &vectors);
    write("read_index", "seed-0", &ranges::encode("seed", &binlog).expect("a whole binlog"));
    write("read_index", "binlog-0", &binlog);
    write("delta_binlog", "seed-0", &delta::encode(SegmentId(7), &[0, 3, 9]));
    let nodes = vec![vec![vec![1, 2]], vec![vec![0, 2], vec![2]], vec![vec![0, 1], vec![1]]];
    let graph = FlatGraph::from_nodes(&nodes, 2);
    write("index_file", "seed-0", &index::encode(SegmentId(7), Metric::L2, &graph, None));
    write("index_file", "seed-1", &index::encode_hnsw_dump(SegmentId(7), 3, b"graph", b"data"));
    let rows = Vectors::F32(vectors[..9].to_vec().into());
    let never = AtomicBool::new(false);
    let codes = Codes::encode(Quantization::Sq8, Metric::Cosine, 3, &rows, &never).unwrap().expect("cosine has codes");
    write("index_file", "seed-2", &index::encode(SegmentId(7), Metric::Cosine, &graph, Some(&codes)));
    let codes = Codes::encode(Quantization::RaBitQ, Metric::Cosine, 3, &rows, &never).unwrap().expect("cosine has codes");
    write("index_file", "rabitq-0", &index::encode(SegmentId(7), Metric::Cosine, &graph, Some(&codes)));
    let sparse_rows = milvus_core::synthetic::splade_like(20, 64, 6, 1);
    let inverted = milvus_core::inverted::Inverted::build(Metric::L2, sparse_rows.iter().map(|r| r.view()));
    write("index_file", "inverted-0", &milvus_core::format::inverted::encode(SegmentId(7), &inverted));
    write("index_file", "seed-3", &index::encode_version(index::VERSION_FLAT, SegmentId(7), Metric::L2, &graph, None));
    let mut m = Manifest::new(3, Metric::L2, Some("s3://bucket/prefix".into()));
    m.add_growing(100);
    write("manifest", "seed-0", &m.encode());
    write("manifest", "seed-1", &Manifest::new(128, Metric::InnerProduct, None).encode());
    println!("seeds written to {}/seeds", env!("CARGO_MANIFEST_DIR"));
}

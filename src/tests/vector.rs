//! The `vector` type inside the database: I/O, typmods, casts, operators,
//! and the errors bad input gets.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn one<T: pgrx::IntoDatum + pgrx::FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    #[pg_test]
    fn text_round_trip_and_whitespace() {
        assert_eq!(one::<String>("SELECT ' [ 1 , 2.5,-3e-2 ] '::vector::text"), "[1,2.5,-0.03]");
        assert_eq!(one::<String>("SELECT '[1e30,1.5e-7]'::vector::text"), "[1e+30,1.5e-07]");
        assert_eq!(one::<i32>("SELECT vector_dims('[1,2,3]'::vector)"), 3);
    }

    #[pg_test]
    fn typmod_is_enforced_on_assignment_and_cast() {
        Spi::run("CREATE TEMP TABLE t (v vector(3))").unwrap();
        Spi::run("INSERT INTO t VALUES ('[1,2,3]')").unwrap();
        assert_eq!(
            one::<String>(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname \
                    = 'v'"
            ),
            "vector(3)"
        );
        assert_eq!(one::<String>("SELECT '[1,2]'::vector(2)::text"), "[1,2]");
    }

    #[pg_test(error = "expected 3 dimensions, not 2")]
    fn typmod_mismatch_on_insert() {
        Spi::run("CREATE TEMP TABLE t (v vector(3))").unwrap();
        Spi::run("INSERT INTO t VALUES ('[1,2]')").unwrap();
    }

    #[pg_test(error = "expected 2 dimensions, not 3")]
    fn typmod_mismatch_on_cast() {
        Spi::run("SELECT '[1,2,3]'::vector(2)").unwrap();
    }

    #[pg_test(error = "dimensions for type vector cannot exceed 16000")]
    fn typmod_over_limit() {
        Spi::run("CREATE TEMP TABLE t (v vector(16001))").unwrap();
    }

    #[pg_test(error = "invalid input syntax for type vector: \"[1,a]\"")]
    fn malformed_text() {
        Spi::run("SELECT '[1,a]'::vector").unwrap();
    }

    #[pg_test(error = "vector must have at least 1 dimension")]
    fn empty_vector() {
        Spi::run("SELECT '[]'::vector").unwrap();
    }

    #[pg_test(error = "NaN not allowed in vector (element 2)")]
    fn nan_element() {
        Spi::run("SELECT '[1,NaN]'::vector").unwrap();
    }

    #[pg_test(error = "infinite value not allowed in vector (element 1)")]
    fn infinite_element() {
        Spi::run("SELECT '[Infinity]'::vector").unwrap();
    }

    #[pg_test(error = "different vector dimensions 2 and 3")]
    fn operand_dimension_mismatch() {
        Spi::run("SELECT '[1,2]'::vector <-> '[1,2,3]'::vector").unwrap();
    }

    #[pg_test(error = "array must not contain nulls")]
    fn array_with_null() {
        Spi::run("SELECT ARRAY[1,NULL,3]::real[]::vector").unwrap();
    }

    #[pg_test]
    fn distances_match_definitions() {
        let close = |sql: &str, want: f64| {
            let got = one::<f64>(sql);
            assert!((got - want).abs() < 1e-5, "{sql}: {got} != {want}");
        };
        close("SELECT '[1,2,3]'::vector <-> '[4,5,6]'", 27f64.sqrt());
        close("SELECT l2_distance('[1,2,3]'::vector, '[4,5,6]')", 27f64.sqrt());
        close("SELECT '[1,2,3]'::vector <#> '[4,5,6]'", -32.0);
        close("SELECT inner_product('[1,2,3]'::vector, '[4,5,6]')", 32.0);
        close("SELECT '[1,2,3]'::vector <=> '[4,5,6]'", 0.025368153802923787);
        close("SELECT vector_norm('[3,4]')", 5.0);
        assert!(one::<f64>("SELECT cosine_distance('[0,0]'::vector, '[1,1]')").is_nan());
    }

    #[pg_test]
    fn arithmetic_comparison_and_casts() {
        assert_eq!(one::<String>("SELECT ('[1,2]'::vector + '[3,4]')::text"), "[4,6]");
        assert_eq!(one::<String>("SELECT ('[1,2]'::vector - '[3,4]')::text"), "[-2,-2]");
        assert_eq!(one::<String>("SELECT l2_normalize('[3,4]'::vector)::text"), "[0.6,0.8]");
        assert!(one::<bool>("SELECT '[1,2]'::vector = '[1,2]'"));
        assert!(one::<bool>("SELECT '[1,2]'::vector <> '[1,3]'"));
        assert!(one::<bool>("SELECT '[1,2]'::vector < '[1,3]'"));
        assert_eq!(
            one::<i64>("SELECT count(DISTINCT v) FROM (VALUES ('[1,2]'::vector), ('[1,2]'), ('[2,1]')) s(v)"),
            2
        );
        assert_eq!(one::<String>("SELECT ARRAY[1,2,3]::real[]::vector::text"), "[1,2,3]");
        assert_eq!(one::<String>("SELECT ARRAY[1,2]::integer[]::vector::text"), "[1,2]");
        assert_eq!(one::<String>("SELECT ARRAY[1.5,2]::float8[]::vector::text"), "[1.5,2]");
        assert_eq!(one::<String>("SELECT ARRAY[1.25,2]::numeric[]::vector::text"), "[1.25,2]");
        assert_eq!(one::<Vec<f32>>("SELECT '[1,2]'::vector::real[]"), vec![1.0, 2.0]);
    }

    #[pg_test]
    fn binary_send_is_pgvector_wire_format() {
        assert_eq!(
            one::<Vec<u8>>("SELECT vector_send('[1,-2.5]')"),
            vec![0, 2, 0, 0, 0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0]
        );
    }

    #[pg_test]
    fn vector_type_oid_is_found() {
        let oid = crate::types::vector_type_oid();
        assert_eq!(oid, one::<pg_sys::Oid>("SELECT 'vector'::regtype::oid"));
    }
}

use super::*;

/// The README's "Environment" table is this table, row for row.
#[test]
fn readme_environment_table_is_the_variable_table() {
    let readme = include_str!("../../../../README.md");
    let start = readme
        .find("\n## Environment\n")
        .expect("README has an Environment section");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| `")).collect();
    let want: Vec<String> = VARIABLES
        .iter()
        .map(|v| format!("| `{}` | {} | {} |", v.name, v.default, v.meaning))
        .collect();
    if rows != want {
        panic!(
            "README's Environment table differs from runtime::config::vars::VARIABLES; \
                 it should read:\n\n| variable | default | meaning |\n|---|---|---|\n{}\n",
            want.join("\n")
        );
    }
}

/// `Config::from_lookup` asks for every variable of the table and for no other.
#[test]
fn config_reads_exactly_the_table() {
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    super::super::Config::from_lookup(|k| {
        asked.borrow_mut().insert(k.to_string());
        None
    })
    .unwrap();
    let asked = asked.into_inner();
    let table: std::collections::BTreeSet<String> =
        VARIABLES.iter().map(|v| v.name.to_string()).collect();
    assert_eq!(asked, table);
    for k in LOWERING_VARS {
        assert!(
            table.contains(k),
            "{k} is a lowering variable but not in the table"
        );
    }
    let mut names: Vec<_> = VARIABLES.iter().map(|v| v.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), VARIABLES.len(), "a variable is listed twice");
}

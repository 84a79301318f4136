use std::collections::BTreeMap;
use std::path::Path;

use paddock_protocol::{ContextSpec, InlineSkill};

use super::*;

fn inline(name: &str) -> InlineSkill {
    InlineSkill {
        name: name.to_string(),
        description: "Does a thing.".to_string(),
        body: "Steps.".to_string(),
        files: BTreeMap::new(),
    }
}

fn spec_with(skills: Vec<InlineSkill>) -> ContextSpec {
    ContextSpec {
        inline_skills: skills,
        ..ContextSpec::default()
    }
}

fn library_skill(library: &Path, dir: &str, md: &str) {
    std::fs::create_dir_all(library.join(dir)).unwrap();
    std::fs::write(library.join(dir).join("SKILL.md"), md).unwrap();
}

#[test]
fn bad_names_are_rejected_with_the_reason() {
    let cases = [
        (
            "../escape",
            "the name contains `..`; a skill may not leave its directory",
        ),
        (
            "..",
            "the name contains `..`; a skill may not leave its directory",
        ),
        (
            "a/b",
            "the name contains a path separator; a skill name is one directory name",
        ),
        (
            "/etc/passwd",
            "the name is an absolute path; a skill name is one directory name",
        ),
        ("", "the name is empty"),
        (
            "Big",
            "a skill name is lowercase letters, digits and `-`, not starting or ending with `-`",
        ),
        (
            "-x",
            "a skill name is lowercase letters, digits and `-`, not starting or ending with `-`",
        ),
    ];
    for (name, reason) in cases {
        let err = load(&spec_with(vec![inline(name)])).unwrap_err();
        assert_eq!(
            err,
            SkillError::InvalidName {
                name: name.to_string(),
                origin: "inline context.skill[0]".to_string(),
                reason,
            },
            "name {name:?}"
        );
    }
    let long = "a".repeat(65);
    assert_eq!(
        load(&spec_with(vec![inline(&long)]))
            .unwrap_err()
            .to_string(),
        format!("skill `{long}` (inline context.skill[0]): the name is longer than 64 characters")
    );
}

#[test]
fn the_error_message_names_skill_origin_and_reason() {
    let err = load(&spec_with(vec![inline("ok"), inline("../x")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "skill `../x` (inline context.skill[1]): the name contains `..`; a skill may not leave its directory"
    );
}

#[test]
fn collisions_are_rejected() {
    let err = load(&spec_with(vec![inline("dup"), inline("dup")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "skill `dup` is given twice: inline context.skill[0] and inline context.skill[1]"
    );

    let dir = tempfile::tempdir().unwrap();
    library_skill(
        dir.path(),
        "dup",
        "---\nname: dup\ndescription: From the library.\n---\nBody\n",
    );
    let spec = ContextSpec {
        skills_dir: Some(dir.path().to_path_buf()),
        inline_skills: vec![inline("dup")],
        ..ContextSpec::default()
    };
    assert_eq!(
        load(&spec).unwrap_err().to_string(),
        format!(
            "skill `dup` is given twice: library {} and inline context.skill[0]",
            dir.path().display()
        )
    );
}

#[test]
fn supporting_files_stay_inside_the_skill() {
    for (file, reason) in [
        (
            "../../AGENTS.md",
            "the path leaves the skill's directory (`..` or `.`)",
        ),
        (
            "/etc/x",
            "the path is absolute; give it relative to the skill's directory",
        ),
        (
            "SKILL.md",
            "`SKILL.md` is written from the skill's name, description and body",
        ),
    ] {
        let mut s = inline("files");
        s.files.insert(file.to_string(), "x".to_string());
        assert_eq!(
            load(&spec_with(vec![s])).unwrap_err(),
            SkillError::InvalidFile {
                name: "files".into(),
                origin: "inline context.skill[0]".into(),
                file: file.into(),
                reason: reason.into(),
            }
        );
    }
}

#[test]
fn sizes_are_capped() {
    let mut s = inline("big");
    s.body = "x".repeat(MAX_SKILL_MD_BYTES);
    let err = load(&spec_with(vec![s])).unwrap_err().to_string();
    assert!(
        err.starts_with("skill `big` (inline context.skill[0]): SKILL.md has "),
        "{err}"
    );
    let mut s = inline("many");
    s.files.insert("a.txt".into(), "x".repeat(MAX_SKILL_BYTES));
    let err = load(&spec_with(vec![s])).unwrap_err().to_string();
    assert!(
        err.ends_with(&format!("bytes in all (at most {MAX_SKILL_BYTES})")),
        "{err}"
    );
    let too_many: Vec<InlineSkill> = (0..=MAX_SKILLS).map(|i| inline(&format!("s{i}"))).collect();
    assert_eq!(
        load(&spec_with(too_many)).unwrap_err(),
        SkillError::TooMany {
            count: MAX_SKILLS + 1
        }
    );
}

#[test]
fn descriptions_are_one_line() {
    let mut s = inline("desc");
    s.description = "two\nlines".into();
    assert_eq!(
        load(&spec_with(vec![s])).unwrap_err().to_string(),
        "skill `desc` (inline context.skill[0]): the description must be one line"
    );
}

#[test]
fn library_skills_are_read_with_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path();
    library_skill(
        lib,
        "alpha",
        "---\nname: alpha\ndescription: \"Alpha things.\"\n---\nDo alpha.\n",
    );
    std::fs::create_dir_all(lib.join("alpha/scripts")).unwrap();
    std::fs::write(lib.join("alpha/scripts/run.sh"), "echo alpha\n").unwrap();
    library_skill(lib, "beta", "---\nname: beta\ndescription: Beta.\n---\n");
    let all = load(&ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        ..ContextSpec::default()
    })
    .unwrap();
    let origin = format!("library {}", lib.display());
    assert_eq!(
        all,
        vec![
            Skill {
                name: "alpha".into(),
                description: "Alpha things.".into(),
                origin: origin.clone(),
                files: BTreeMap::from([
                    (
                        "SKILL.md".to_string(),
                        b"---\nname: alpha\ndescription: \"Alpha things.\"\n---\nDo alpha.\n"
                            .to_vec()
                    ),
                    ("scripts/run.sh".to_string(), b"echo alpha\n".to_vec()),
                ]),
            },
            Skill {
                name: "beta".into(),
                description: "Beta.".into(),
                origin: origin.clone(),
                files: BTreeMap::from([(
                    "SKILL.md".to_string(),
                    b"---\nname: beta\ndescription: Beta.\n---\n".to_vec()
                )]),
            },
        ]
    );
    // A selection, and a name the library does not have.
    let some = load(&ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        skills: Some(vec!["beta".into()]),
        ..ContextSpec::default()
    })
    .unwrap();
    assert_eq!(
        some.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["beta"]
    );
    let missing = load(&ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        skills: Some(vec!["gamma".into()]),
        ..ContextSpec::default()
    })
    .unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!(
            "context.skills: skill `gamma` is not in the library {} (context.skills_dir)",
            lib.display()
        )
    );
    // Names from the spec are checked before the library is touched.
    let traversal = load(&ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        skills: Some(vec!["../alpha".into()]),
        ..ContextSpec::default()
    })
    .unwrap_err();
    assert_eq!(
        traversal.to_string(),
        format!(
            "skill `../alpha` ({origin}): the name contains `..`; a skill may not leave its directory"
        )
    );
}

#[test]
fn library_skills_need_matching_front_matter_and_no_links() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path();
    library_skill(lib, "alpha", "---\nname: other\ndescription: x\n---\n");
    let spec = ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        ..ContextSpec::default()
    };
    let origin = format!("library {}", lib.display());
    assert_eq!(
        load(&spec).unwrap_err().to_string(),
        format!("skill `alpha` ({origin}): SKILL.md says `name: other`; it must match the directory name")
    );
    library_skill(lib, "alpha", "no front matter\n");
    assert_eq!(
        load(&spec).unwrap_err().to_string(),
        format!("skill `alpha` ({origin}): SKILL.md must start with front matter (`---`, `name:`, `description:`, `---`)")
    );
    library_skill(lib, "alpha", "---\nname: alpha\ndescription: x\n---\n");
    std::os::unix::fs::symlink("/etc/passwd", lib.join("alpha/passwd")).unwrap();
    assert_eq!(
        load(&spec).unwrap_err().to_string(),
        format!("skill `alpha` ({origin}): file `passwd`: is a symbolic link; skills hold regular files only")
    );
    // A skill named in `skills` that is a link to a directory elsewhere
    // (a SKILL.md there) is refused, not read through.
    let elsewhere = tempfile::tempdir().unwrap();
    library_skill(
        elsewhere.path(),
        "beta",
        "---\nname: beta\ndescription: x\n---\n",
    );
    std::fs::write(elsewhere.path().join("beta/secret"), "s").unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("beta"), lib.join("beta")).unwrap();
    let named = ContextSpec {
        skills_dir: Some(lib.to_path_buf()),
        skills: Some(vec!["beta".into()]),
        ..ContextSpec::default()
    };
    assert_eq!(
        load(&named).unwrap_err().to_string(),
        format!("skill `beta` ({origin}): is a symbolic link; a library's skills are directories")
    );
}

#[test]
fn inline_skill_md_has_front_matter() {
    let skills = load(&spec_with(vec![inline("one")])).unwrap();
    assert_eq!(
        String::from_utf8(skills[0].files["SKILL.md"].clone()).unwrap(),
        "---\nname: one\ndescription: Does a thing.\n---\n\nSteps.\n"
    );
}

/// A skill's description reaches AGENTS.md/CLAUDE.md and SKILL.md: an
/// escape, a bidirectional override or a tag character spelling hidden
/// text is refused by its code point, from a spec and from a library
/// alike, never echoed; an inline body keeps its line breaks and tabs and
/// loses the rest. Before, only a line break was refused, and the body was
/// written as sent.
#[test]
fn a_skills_description_and_body_are_plain_text() {
    let refused = |description: &str| {
        let mut s = inline("desc");
        s.description = description.into();
        load(&spec_with(vec![s])).unwrap_err().to_string()
    };
    let library = tempfile::tempdir().unwrap();
    library_skill(
        library.path(),
        "lib",
        "---\nname: lib\ndescription: Run\u{202e}txt.exe\n---\n\nBody.\n",
    );
    let from_library = load(&ContextSpec {
        skills_dir: Some(library.path().to_path_buf()),
        ..ContextSpec::default()
    })
    .unwrap_err()
    .to_string();
    assert_eq!(
        [
            refused("Run\u{1b}]0;x\u{7} it."),
            refused("Do it.\u{e0001}\u{e0069}"),
            from_library,
        ],
        [
            "skill `desc` (inline context.skill[0]): the description must be plain text: U+001B \
             at byte 3 is a control character"
                .to_string(),
            "skill `desc` (inline context.skill[0]): the description must be plain text: U+E0001 \
             at byte 6 is an invisible character"
                .to_string(),
            format!(
                "skill `lib` (library {}): the description must be plain text: U+202E at byte 3 \
                 is a bidirectional control",
                library.path().display()
            ),
        ]
    );
    let mut s = inline("body");
    s.body = "Step\u{1b}[2J one.\r\n\tStep\u{202e} two.\u{200b}".into();
    let skills = load(&spec_with(vec![s])).unwrap();
    assert_eq!(
        String::from_utf8(skills[0].files["SKILL.md"].clone()).unwrap(),
        "---\nname: body\ndescription: Does a thing.\n---\n\nStep[2J one.\n\tStep two.\n"
    );
}

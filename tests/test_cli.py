"""The command line: convert keeps the column tokenization for `spacy evaluate`; inspect and evaluate run."""
import spacy
from spacy.training import Corpus
from typer.testing import CliRunner

from conftest import component_config
from spacy_treecrf.cli import app
from spacy_treecrf.word_classes import read_clusters

CONLL = """-DOCSTART- -X- -X- O

LONDON NNP B-NP B-LOC
1996-08-30 CD I-NP O

Alice NNP B-NP B-PER
visited VBD B-VP O
New NNP B-NP B-LOC
York NNP I-NP I-LOC
. . O O
"""


def test_convert_inspect_evaluate(tmp_path):
    src = tmp_path / "mini.txt"
    src.write_text(CONLL, encoding="utf8")
    runner = CliRunner()
    out = runner.invoke(app, ["convert", str(src), str(tmp_path / "mini.spacy"), "--format", "conll2003"])
    assert out.exit_code == 0, out.output
    nlp = spacy.blank("en")
    examples = list(Corpus(str(tmp_path / "mini.spacy"))(nlp))
    # the column tokens survive re-reading (spaCy's tokenizer would split 1996-08-30)
    assert [t.text for t in examples[0].predicted] == ["LONDON", "1996-08-30"]
    assert [(e.text, e.label_) for e in examples[1].reference.ents] == [("Alice", "PER"), ("New York", "LOC")]

    nlp.add_pipe("treecrf", config=component_config({"max_leaves": 4, "shrinkage": 1.0}))
    nlp.initialize(lambda: examples)
    for _ in range(6):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "model")
    out = runner.invoke(app, ["inspect", str(tmp_path / "model"), "--top", "5", "--min-support", "1"])
    assert out.exit_code == 0, out.output
    assert "target ner" in out.output and "B-PER" in "".join(out.output)
    header, first = out.output.splitlines()[1:3]
    assert header.split()[:3] == ["label", "value", "n"]
    assert ("[a shared tree's leaf" in header) == nlp.get_pipe("treecrf").ensemble.shared
    assert first.split()[0] in ("O", "B-PER", "I-LOC", "B-LOC") and "(" not in first.split()[1]
    out = runner.invoke(app, ["evaluate", str(tmp_path / "model"), str(src), "--format", "conll2003"])
    assert out.exit_code == 0, out.output
    assert "ents_f" in out.output
    # the same file as plain columns: words first, labels last
    out = runner.invoke(app, ["evaluate", str(tmp_path / "model"), str(src), "--format", "columns",
                              "--columns", "word,pos,chunk,ner", "--target", "ner"])
    assert out.exit_code == 0, out.output
    assert "ents_f" in out.output


def test_every_command_prints_a_coded_error_as_one_line_and_evaluate_refuses_data_without_the_target(tmp_path):
    """A damaged model, a missing file, data without the target's gold: one coded line and exit status 1, not a
    traceback around it (nor ents_f 0.0 and exit 0)."""
    src = tmp_path / "mini.txt"
    src.write_text(CONLL, encoding="utf8")
    nlp = spacy.blank("en")
    runner = CliRunner()
    assert runner.invoke(app, ["convert", str(src), str(tmp_path / "mini.spacy")]).exit_code == 0
    examples = list(Corpus(str(tmp_path / "mini.spacy"))(nlp))
    nlp.add_pipe("treecrf", config=component_config({"max_leaves": 4}))
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    nlp.to_disk(tmp_path / "model")
    two = tmp_path / "two.txt"
    two.write_text("The DT\ndog NN\n", encoding="utf8")
    out = runner.invoke(app, ["evaluate", str(tmp_path / "model"), str(two), "--format", "columns", "--columns",
                              "word,tag", "--target", "tag"])
    assert out.exit_code == 1 and "E208" in out.output and str(two) in out.output and "ner" in out.output
    damaged = tmp_path / "model" / "treecrf" / "model.msgpack"
    damaged.write_bytes(damaged.read_bytes()[:100])
    for args in (["inspect", str(tmp_path / "model")], ["explain", str(tmp_path / "model"), "Alice visited ."],
                 ["evaluate", str(tmp_path / "model"), str(src)],
                 ["convert", str(tmp_path / "missing.txt"), str(tmp_path / "x.spacy")]):
        out = runner.invoke(app, args)
        lines = [line for line in out.output.splitlines() if line.strip()]
        assert out.exit_code == 1 and len(lines) == 1 and lines[0].startswith("[E"), (args, out.output[-2000:])


def test_the_command_line_docstring_names_every_command():
    import spacy_treecrf.cli as cli

    names = [command.name or command.callback.__name__ for command in app.registered_commands]
    assert len(names) == 5 and all(name in cli.__doc__.split("\n")[0] for name in names)


def test_clusters_learns_a_file_the_features_read(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the dog runs .\na cat sleeps .\nthe cat runs .\na dog sleeps .\n" * 5, encoding="utf8")
    out = CliRunner().invoke(app, ["clusters", str(text), str(tmp_path / "paths.txt"), "--n-clusters", "3"])
    assert out.exit_code == 0 and "7 words in 3 clusters" in out.output, out.output
    learned = read_clusters(tmp_path / "paths.txt")
    assert learned["dog"] == learned["cat"] and learned["runs"] == learned["sleeps"] != learned["dog"]
    out = CliRunner().invoke(app, ["clusters", str(tmp_path / "none.txt"), str(tmp_path / "x.txt")])
    assert out.exit_code == 1 and out.output.startswith("[E240]") and "none.txt" in out.output


def test_spans_opened_by_an_inside_tag_are_read_as_begins_with_a_word(tmp_path):
    src = tmp_path / "iob1.txt"
    src.write_text("Alice I-PER\nmet O\nBob I-PER\nSmith I-PER\nin O\nParis I-LOC\n", encoding="utf8")
    out = CliRunner().invoke(app, ["convert", str(src), str(tmp_path / "iob1.spacy"), "--format", "columns",
                                   "--columns", "word,ner", "--target", "ner"])
    assert out.exit_code == 0, out.output
    assert "W010" in out.output and "3 spans open with an I- tag" in out.output
    doc = next(iter(Corpus(str(tmp_path / "iob1.spacy"))(spacy.blank("en")))).reference
    assert [(e.text, e.label_) for e in doc.ents] == [("Alice", "PER"), ("Bob Smith", "PER"), ("Paris", "LOC")]


def test_convert_any_column_layout_and_clear_errors(tmp_path):
    """Two-column files (word, tag) and any other layout convert with --format columns; bad options are one
    line naming the problem, not a traceback."""
    src = tmp_path / "two.txt"
    src.write_text("The\tDT\ndog\tNN\n\nRuns\tVBZ\n", encoding="utf8")
    runner = CliRunner()
    for flags in ([], ["--words-column", "word", "--label-column", "tag"]):  # first and last: the defaults
        out = runner.invoke(app, ["convert", str(src), str(tmp_path / "two.spacy"), "--format", "columns",
                                  "--columns", "word,tag", "--target", "tag"] + flags)
        assert out.exit_code == 0, out.output
        docs = [eg.reference for eg in Corpus(str(tmp_path / "two.spacy"))(spacy.blank("en"))]
        assert [[(t.text, t.tag_) for t in d] for d in docs] == [[("The", "DT"), ("dog", "NN")], [("Runs", "VBZ")]]
    out = runner.invoke(app, ["convert", str(src), str(tmp_path / "x.spacy"), "--format", "columns"])
    assert out.exit_code == 1 and "E142" in out.output and "--columns" in out.output and "--target" in out.output
    assert "words_column" not in out.output.split("unless")[0]  # flags, not Python parameter names
    out = runner.invoke(app, ["convert", str(src), str(tmp_path / "x.spacy"), "--keep", "pos"])
    assert out.exit_code == 1 and "E164" in out.output

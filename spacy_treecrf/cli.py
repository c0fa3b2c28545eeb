"""Command line: `python -m spacy_treecrf inspect|explain|convert|evaluate|clusters`: a trained pipeline's strongest
rules, why each token of a text gets its label, column files to .spacy, a pipeline scored on a column file, and Brown
clusters learned from a text for the features' ``clusters`` setting."""
import functools
from pathlib import Path
from typing import List, Optional

import spacy
import typer
from spacy.tokens import DocBin

from .errors import Errors, Warnings
from .word_classes import DEFAULT_CLUSTERS, DEFAULT_MIN_COUNT, brown_clusters, read_text, write_clusters

app = typer.Typer(help="spacy-treecrf: TreeCRF sequence labelling for spaCy", no_args_is_help=True)


class UserError(Exception):
    """A coded message for the user: printed alone on stderr, exit status 1."""


def one_line_errors(command):
    """The one error path of every command: an error of the package, whose message carries a code ("[E113] ..."),
    raised by spaCy's loading as much as by this package, is printed as that one line on stderr with exit status
    1, not under a traceback of the package's internals; any other error keeps its traceback (a bug to report)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (UserError, ValueError, TypeError, OSError, KeyError) as err:
            message = str(err.args[0]) if err.args else ""
            if not isinstance(err, UserError) and not message.startswith("[E"):
                raise
            typer.echo(message, err=True)
            raise typer.Exit(1)
    return run


@app.command()
@one_line_errors
def inspect(pipeline: Path = typer.Argument(..., help="A trained pipeline directory or package name"),
            top: int = typer.Option(10, help="Rules per component"),
            min_support: float = typer.Option(5.0, help="Smallest leaf support shown")):
    """Print each treecrf component's labels, size and strongest rules (tree paths as conjunctions)."""
    from .pipe import TreeCRFComponent

    nlp = spacy.load(pipeline)
    found = False
    for name, pipe in nlp.pipeline:
        if not isinstance(pipe, TreeCRFComponent):
            continue
        found = True
        ens = pipe.ensemble
        typer.echo(f"== {name}: target {pipe.target}, {len(pipe.labels)} labels, {pipe.cfg['rounds']} rounds, "
                   f"{ens.n_trees} trees, {len(ens.nodes.kind)} nodes, {pipe.featurizer.n_features} feature columns")
        typer.echo(f"  {'label':>10s} {'value':>6s}  {'n':<10s}path: the tests a token passes to reach the leaf"
                   + (" [a shared tree's leaf: its next strongest labels]" if ens.shared else ""))
        for label, rule, value, support in pipe.rules(top, min_support):
            typer.echo(f"  {label:>10s} {value:+.3f}  n={support:<8.0f} {rule}")
    if not found:
        raise UserError(Errors.E148.format(pipeline=pipeline))


@app.command()
@one_line_errors
def explain(pipeline: Path = typer.Argument(..., help="A trained pipeline directory or package name"),
            text: str = typer.Argument(..., help="The text to tag and explain"),
            component: Optional[str] = typer.Option(None, help="The treecrf component (default: every one)"),
            top: int = typer.Option(3, help="Leaves shown per token (the rest summed)")):
    """Tag TEXT and print, per token and treecrf component, the label, the potential of its transition and the
    tree leaves that make it up, largest first: each leaf's contribution and its path in words."""
    from .engine.rules import explanation_table
    from .pipe import TreeCRFComponent

    nlp = spacy.load(pipeline)
    names = [name for name, pipe in nlp.pipeline if isinstance(pipe, TreeCRFComponent)]
    if not names:
        raise UserError(Errors.E148.format(pipeline=pipeline))
    if component is not None and component not in names:
        raise UserError(Errors.E179.format(name=component, pipeline=pipeline, names=names))
    doc = nlp.make_doc(text)
    for name, pipe in nlp.pipeline:  # each treecrf explained on the doc as it receives it
        if name in names and component in (None, name):
            explanations = pipe.explain(doc)
            typer.echo(f"== {name} ({pipe.target})")
            typer.echo(explanation_table([token.text for token in doc], explanations, top))
        doc = pipe(doc)


# The options that say how a column file is read, shared by convert and evaluate.
INPUT_PATH = typer.Argument(..., help="Column file (NETtalk: the data directory)")
FORMAT = typer.Option("conll2003", help="conll2000 | conll2003 | nettalk | protein | columns")
COLUMNS = typer.Option(None, help="format columns: the column names, e.g. word,pos,ner")
WORDS_COLUMN = typer.Option(None, help="format columns: the words' column (default: the first)")
LABEL_COLUMN = typer.Option(None, help="format columns: the labels' column (default: the last)")
SEP = typer.Option(None, help="column separator (default: any whitespace)")
TARGET = typer.Option(None, help="ner | spans | tag | pos | token_attr (format columns: required)")
SPANS_KEY = typer.Option("chunks", help="doc.spans key for target spans")
KEEP = typer.Option([], help="column=attribute to keep as input, e.g. pos=tag_")
SPLIT = typer.Option(None, help="NETtalk split: train_1000 | test_1000 | all")
DOCUMENTS = typer.Option(False, help="a Doc per document (-DOCSTART- to -DOCSTART-), not per sentence")


def column_corpus(input_path, format, columns, words_column, label_column, sep, target, spans_key, keep, split,
                  documents=False):
    """The ColumnCorpus the options describe; ValueError (a coded message) for a bad option."""
    from .readers import ColumnCorpus

    bad = [item for item in keep if "=" not in item]
    if bad:
        raise ValueError(Errors.E164.format(item=bad[0]))
    return ColumnCorpus(str(input_path), format=format, target=target, spans_key=spans_key,
                        keep_columns=dict(item.split("=", 1) for item in keep), split=split,
                        columns=columns.split(",") if columns else None, words_column=words_column,
                        label_column=label_column, sep=sep, documents=documents)


@app.command()
@one_line_errors
def convert(input_path: Path = INPUT_PATH,
            output_path: Path = typer.Argument(..., help="Output .spacy file"),
            format: str = FORMAT, columns: Optional[str] = COLUMNS, words_column: Optional[str] = WORDS_COLUMN,
            label_column: Optional[str] = LABEL_COLUMN, sep: Optional[str] = SEP, target: Optional[str] = TARGET,
            spans_key: str = SPANS_KEY, keep: List[str] = KEEP, split: Optional[str] = SPLIT,
            documents: bool = DOCUMENTS, lang: str = typer.Option("en", help="Language of the blank vocab")):
    """Convert a column file to a .spacy DocBin (gold on the docs; kept columns as token attributes). Any layout:
    --format columns --columns word,pos,tag --target tag (words: the first column, labels: the last)."""
    corpus = column_corpus(input_path, format, columns, words_column, label_column, sep, target, spans_key, keep,
                           split, documents)
    docs = [eg.reference for eg in corpus(spacy.blank(lang))]
    for doc in docs:  # column files do not record spacing: `spacy evaluate` then keeps these tokens
        doc.has_unknown_spaces = True
    DocBin(docs=docs, store_user_data=True).to_disk(output_path)
    typer.echo(f"Wrote {len(docs)} docs, {sum(len(d) for d in docs)} tokens to {output_path}")
    if corpus.spans_opened_by_inside:
        typer.echo(Warnings.W010.format(n=corpus.spans_opened_by_inside), err=True)


@app.command()
@one_line_errors
def evaluate(pipeline: Path = typer.Argument(..., help="A trained pipeline"),
             input_path: Path = INPUT_PATH, format: str = FORMAT, columns: Optional[str] = COLUMNS,
             words_column: Optional[str] = WORDS_COLUMN, label_column: Optional[str] = LABEL_COLUMN,
             sep: Optional[str] = SEP, target: Optional[str] = TARGET, spans_key: str = SPANS_KEY,
             keep: List[str] = KEEP, split: Optional[str] = SPLIT, documents: bool = DOCUMENTS,
             output: Optional[Path] = typer.Option(None, help="Write the scores as JSON")):
    """Score a pipeline on a column file read like training data, so input columns (e.g. the CoNLL POS column)
    reach the predicted docs, which `spacy evaluate` on a .spacy file cannot do."""
    import srsly

    from .pipe import TreeCRFComponent

    nlp = spacy.load(pipeline)
    corpus = column_corpus(input_path, format, columns, words_column, label_column, sep, target, spans_key, keep,
                           split, documents)
    examples = list(corpus(nlp))
    crfs = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, TreeCRFComponent)]
    if crfs and not any(pipe.has_gold(eg.reference) for pipe in crfs for eg in examples):
        raise UserError(Errors.E208.format(path=input_path, targets=sorted({pipe.target for pipe in crfs}),
                                           format=format))
    scores = nlp.evaluate(examples)
    for key, value in scores.items():
        if isinstance(value, float):
            typer.echo(f"{key:20s} {value:.4f}")
    if output:
        srsly.write_json(output, scores)


@app.command()
@one_line_errors
def clusters(text_path: Path = typer.Argument(..., help="Raw UTF-8 text: a sentence a line, tokens split by spaces"),
             output_path: Path = typer.Argument(..., help="Clusters file to write: BITS<tab>WORD a line"),
             n_clusters: int = typer.Option(DEFAULT_CLUSTERS, help="Clusters the merge window keeps"),
             min_count: int = typer.Option(DEFAULT_MIN_COUNT, help="Words seen fewer times are left out")):
    """Learn Brown clusters from a text once, for [components.treecrf.features] clusters = "FILE" (the
    ``cluster_text`` setting learns them at every initialize instead)."""
    learned = brown_clusters(read_text(text_path), n_clusters, min_count)
    write_clusters(learned, output_path)
    typer.echo(f"Wrote {len(learned)} words in {len(set(learned.values()))} clusters to {output_path}")


def main():
    app()

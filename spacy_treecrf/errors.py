"""Every message a user sees, in one place, each with a code (spaCy's style: ``Errors.E001`` reads as
"[E001] <message>", so a message can be looked up by its code). The catalogue imports nothing, so the engine uses it
too."""


def excerpt(text, limit: int = 200) -> str:
    """``text`` as a message shows it: its repr, cut to ``limit`` characters with its length said (a line of a
    file can be megabytes long, and a message is printed whole)."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text):,} characters)"


class _WithCodes(type):
    def __getattribute__(self, code: str) -> str:
        msg = super().__getattribute__(code)
        if code.startswith("__"):
            return msg
        return f"[{code}] {msg}"


class Warnings(metaclass=_WithCodes):
    W001 = ("Component '{name}': the settings {settings} now belong in [components.{name}.booster]; move them there "
            '(they were applied for now).')

    W002 = ("Component '{name}': its trees were grown with missing={trained!r}, which is part of the model; the "
            "configured missing={configured!r} cannot apply to them and is replaced.")

    W003 = ("spacy_treecrf was installed without compiled kernels, and numba can cache them neither next to it nor in "
            "a user's cache folder (no writable HOME): they are compiled in every process, into {path}, which is "
            "removed when the process exits (set NUMBA_CACHE_DIR to a writable folder to keep them across processes).")

    W004 = ("Component '{name}': a boosting round is one pass over the training corpus ({docs} docs, {words} words), "
            "which [training.batcher] cuts into {steps} steps, but [training] {key} is {value} steps, so training "
            "stops before the rounds can go on: set it higher (e.g. --training.{key} {more}), use larger batches, "
            "or set [components.{name}] round_every = \"batch\" for a round per batch.")

    W005 = ("Component '{name}': [training.score_weights] weighs only {weighted}, which no component scores "
            "(target {target!r} gives {keys}), so spaCy would keep the one-round model of step 0 as model-best: "
            "set e.g. --training.score_weights.{key} 1.0 {unset}.")

    W006 = ("TreeCRF.fit with warm_start: the model has {rounds} rounds and n_rounds is {n_rounds}, so no round is "
            "added (n_rounds is the total: raise it to continue).")

    W008 = ("[components.*.booster] scheduler = {scheduler!r} is ignored: where a pipeline trains is no longer part of "
            "its config; start spacy train with {env}={scheduler} instead.")

    W009 = ("rules(): no leaf holds min_support={min_support:g} examples (the largest holds {largest:g}), so no rule "
            "is shown: pass a smaller min_support, e.g. rules(top, min_support=0).")

    W010 = ("{n} spans open with an I- tag (after O, after another type, or first in a sentence): read as B-, as IOB1 "
            "files mean them (where B- only separates two adjacent spans of one type) and as a dangling I- is "
            "repaired.")

    W011 = ("Component '{name}': its model was trained with {settings}; these are part of the model (its feature "
            "columns, its kind of trees), so the model's are used and the configured ones cannot apply.")

    W012 = ("CRF: {settings} set CRFsuite's own training (its optimiser, regularisation, files), which tree boosting "
            "does not have; they are left unused and TreeCRF's defaults train the model (pass TreeCRF's settings, such "
            "as n_rounds or max_leaves, to change them)")

    W007 = ("Component '{name}': the training data has gold labels {labels} that are not among its labels {known}; "
            "they are trained as unknown. To add labels to a trained model, go on training it with "
            "[initialize.components.{name}] resume_from = <its pipeline> (or pass labels= to initialize).")


class Errors(metaclass=_WithCodes):
    # the treecrf component (pipe.py)
    E001 = 'Unknown target {target!r}: choose one of {targets}.'
    E002 = "Target 'spans' needs a non-empty 'spans_key'."
    E003 = "Target 'token_attr' needs 'token_attr', the name of a Token extension."
    E004 = "Setting 'decode' must be one of {decoders}, got {decode!r}."
    E005 = 'No labels found for target {target!r} in the training data: check the reference docs.'
    E006 = "Target 'pos' takes Universal POS tags; {labels} are not UPOS."
    E007 = ('Doc {doc} has overlapping gold spans {a} and {b} in {where}: a BIO target cannot represent overlaps. '
            'Remove one of them or use several components.')
    E008 = "The component '{name}' is not initialized: call nlp.initialize() or load a trained pipeline."
    E009 = "Label {label!r} of component '{name}' is not a BIO label (B-X, I-X or O, X not empty)."
    # boosting settings and rounds (engine/booster.py)
    E010 = "TreeCRF setting 'loss' must be one of {losses}, got {loss!r}"
    E011 = "TreeCRF setting 'leaf_values' must be one of {choices}, got {leaf_values!r}"
    E012 = "TreeCRF setting 'label_splits' must be one of {choices}, got {label_splits!r}"
    E013 = "TreeCRF setting leaf_values='newton' needs loss='crf' (its Hessian), got loss={loss!r}"
    E015 = "TreeCRF setting '{name}' must be {want}, got {value!r}"
    # the grower (engine/grow.py)
    E016 = 'grow_tree: at most 2**31 - 1 positions'
    # missing values (engine/missing.py)
    E017 = "{where} setting 'missing' must be one of {strategies}, got {value!r}"
    # model files (engine/serialize.py)
    E018 = "Model data: unsupported value of type {type_name} at '{where}'"
    E019 = '{kind} model data must be bytes, got {type_name}'
    E020 = '{kind} model data is not a spacy_treecrf model'
    E021 = 'Model data holds a {found!r} model, expected a {kind!r} one'
    E022 = ('{kind} model data has format version {version!r}; this spacy_treecrf reads up to {format_version}: '
            'upgrade spacy_treecrf')
    E210 = ("{kind} model data has the format version {version!r}, which is no version number (a whole number from "
            "1): the file is damaged")
    E023 = '{kind} model data has no payload'
    E024 = "Model data lacks the field '{name}'"
    E025 = "Model data field '{name}' should be {type_name}, got {type_name_2}"
    E026 = "Model array '{name}' has dtype {dtype}, expected {dtype_2}"
    E027 = "Model array '{name}' has shape {shape}, expected {shape_2}"
    E028 = 'Model trees: tree offsets are not increasing from 0 to the node count'
    E029 = 'Model trees: a tree names a label out of range'
    E030 = 'Model trees: unknown node kind'
    E031 = 'Model trees: non-finite leaf value'
    E032 = 'Model trees: a leaf has children'
    E033 = "Model trees: a node is not reached from its tree's root by exactly one path"
    E034 = 'Model trees: a split tests a feature id out of range'
    E035 = 'Model trees: a node count is negative or not finite'
    E036 = "Model data field 'variables' should be a list of names"
    E037 = "Model array 'feature_var' names a variable out of range"
    E038 = 'Cannot serialize array of dtype {dtype}'
    E039 = '{kind} model data is corrupt or truncated ({type_name}: {err})'
    E040 = "Model trees: a '{name}' child index points outside its tree or backwards"
    E041 = 'Model trees: a surrogate split tests a feature id out of range'
    E042 = 'Model trees: a node that does not test a feature has surrogates'
    E043 = 'Model trees: a surrogate list has a gap (-1 before a feature)'
    E044 = "Model array '{name}' names a feature out of range"
    E045 = "Model data: malformed array at '{where}'"
    E046 = "Model data: array at '{where}' has {n_data} bytes, expected {expected}"
    # sparse rows (engine/sparse.py)
    E047 = 'csc_index: at most 2**31 - 1 positions'
    # transition masks (engine/transitions.py)
    E048 = "allowed_transitions must be None, 'bio' or (previous, label) pairs, got {transitions!r}"
    # the estimator (estimator.py)
    E049 = 'TreeCRF got unknown settings {unknown}; the settings are {param_names}'
    E050 = "TreeCRF setting 'decode' must be one of {decoders}, got {decode!r}"
    E051 = "TreeCRF setting 'n_rounds' must be an integer >= 0, got {n_rounds!r}"
    E052 = "TreeCRF setting 'patience' must be None or an integer >= 1, got {patience!r}"
    E053 = 'TreeCRF has no settings {unknown}; the settings are {param_names}'
    E054 = '{call}: {x_name} has {n_x} sequences but {y_name} has {n_y}'
    E055 = 'fit: no known label in y: at least one position must be labelled'
    E056 = 'This TreeCRF is not fitted yet: call fit() or from_bytes() first'
    E059 = '{call}: sequence {q} of {x_name} has {n_xs} positions but {y_name} gives it {n_ys} labels'
    E149 = ('{call}: label {label!r} ({type_name}) at sequence {q}, position {t} of {y_name}: a label must be a '
            'string or an integer (None: unknown)')
    E150 = ('fit: labels {a!r} and {b!r} read the same as text: they would be one label in a saved model; use '
            'one type of label')
    E151 = 'fit: X_dev and y_dev go together: one of them is None'
    E153 = 'TreeCRF model bytes: feature names must be distinct strings; {name!r} is not (or is repeated)'
    E154 = 'TreeCRF model bytes: best_round must be an integer in [0, n_rounds], got {best_round!r}'
    E155 = "Label {label!r} of {name} is listed twice."
    E156 = ('Gold label {label!r} at {where} follows {prev}, which the transition constraints forbid: no label path '
            'can reach it. Fix the labels (IOB1 entities need converting to BIO, IOB2) or the constraints ({fix}).')
    E158 = ('The training loss of round {round} is not finite ({objective}): a gold label sequence has no path the '
            'transition constraints allow, or the settings overflow.')
    E159 = "window_features: '{name}' must be <= {maximum}, got {value}"
    E160 = "{where}: atom {atom!r} has no column (a frozen vocabulary keeps only atoms that have one)"
    E161 = ("window_features: lexicon {name!r} has no file to read (its entries came with a loaded model): give "
            "its path in 'lexicons'")
    E162 = 'The model file {path} is not a regular file (a device, a pipe or a link to one): refused'
    E163 = 'The model file {path} has {size} bytes, more than the {limit} a treecrf model file may have'
    E164 = "convert: --keep takes column=attribute (e.g. pos=tag_), got {item!r}"
    E165 = 'predict_nbest: n must be an integer in [1, {maximum}], got {n!r}'
    E166 = ('Ensemble: a tree for label {label} with {width} leaf values per leaf does not belong in an ensemble '
            'with shared={shared} (shared trees: label -1 and a value per label; per-label trees: none)')
    E169 = ('ensemble: leaf vectors must be finite, on leaves only, with labels ascending within a leaf and below '
            '{n_labels} (version 3 files: of shape (nodes, {n_labels})); shared trees have label -1')
    E170 = 'The model file says shared_trees={setting} but its ensemble holds {kind} trees'
    E171 = "treecrf: 'round_every' must be one of {choices} (a round per pass over the corpus or per batch), got {value!r}"
    E180 = "treecrf: 'n_best' must be an integer in [0, {maximum}] (0: no n-best analyses stored), got {value!r}"
    E181 = 'Ensemble.with_labels: a model of {had} labels cannot lose labels (asked for {n_labels})'
    E182 = "TreeCRF: 'warm_start' must be true or false, got {value!r}"
    E183 = ('fit with warm_start: shared_trees={setting} but the fitted model holds {kind} trees (a continued fit '
            'adds trees of the kind it has; set shared_trees back, or warm_start=False to start over)')
    E172 = "TreeCRF: 'early_stopping' must be one of {choices}, got {value!r}"
    E173 = "TreeCRF: 'validation_fraction' must be a number in (0, 1), got {value!r}"
    E174 = ('fit: early_stopping=True holds out validation sequences from the training data, which needs at least 2 '
            'sequences; y has {n} (pass X_dev / y_dev, or set early_stopping=False)')
    E175 = ('explain: x must be one sequence (a list of positions, as one item of predict\'s X), got {kind}')
    E176 = ('explain: labels must be a list of {n} labels, one per position of x, each one of the model\'s classes; '
            'position {t} has {label!r}')
    E152 = 'The model data has no valid label list: {label!r} (labels are distinct strings or integers)'
    E060 = 'TreeCRF model bytes: invalid settings: {err}'
    E201 = ("Sequence {q}, position {t}, key {key!r}: the value {value!r}{where} is a {kind}; a value must be a "
            "string, a bool, a number or None (missing), or, as python-crfsuite reads them, a dict of such values "
            "or a list, tuple or set of strings")
    E202 = ("{name}{where} is a {kind}: {name} must be a list (or another iterable) of sequences, each a list of "
            "positions (for labels: of labels)")
    E203 = ("TreeCRF: 'window' must be an integer from 0 to {maximum} (the positions either side whose features a "
            "position also reads), got {value!r}")
    E204 = ("fit with warm_start: window={window} but the fitted model reads a window of {fitted} (its trees test "
            "those columns): set window={fitted}, or fit a new model")
    E205 = ("TreeCRF(window={window}): sequence {q}, position {t}: key {key!r} is {what}; a window reads flags and "
            "strings only: leave the window at 0 (put the neighbours' features in the dicts), or {fix}")
    # features (features.py)
    E062 = "window_features: '{name}' must be true or false, not {value!r}"
    E063 = "window_features: '{name}' must be an integer, not {value!r}"
    E064 = "window_features: '{name}' must be >= {minimum}, got {value}"
    E065 = "window_features: 'attrs' must be a list of attribute names, not {attrs!r}"
    E066 = "window_features: 'lexicons' must map a lexicon name to a file path, not {lexicons!r}"
    E067 = 'window_features: lexicon file not found: {path}'
    E068 = 'window_features: {n_docs} training docs but {n_labels} lists of labels'
    E069 = 'WindowFeaturizer: {n_docs} docs but {n_labels} lists of own labels'
    E070 = "window_features: 'attrs' entries must be strings, not {attr!r}"
    E071 = "window_features: unknown attribute {attr!r} in 'attrs'; use one of {allowed} or '_.<extension>'"
    E072 = "window_features: attribute {attr!r} is listed twice in 'attrs'"
    E073 = "window_features: lexicon name {name!r} in 'lexicons' must be a non-empty string without whitespace"
    E074 = "window_features: the path of lexicon {name!r} in 'lexicons' must be a string, not {path!r}"
    E075 = 'window_features: lexicon file {path} is not valid UTF-8 ({err})'
    E076 = "window_features: 'missing_text' must be a string or null, not {missing!r}"
    E078 = 'WindowFeaturizer is not initialized: call initialize(docs) or from_dict(state) first'
    E079 = '{where}: expected a dict, got {type_name}'
    E080 = '{where}: unsupported state version {state!r} (this code reads version {state_version})'
    E081 = "{where}: 'config' must be a dict"
    E082 = "{where}: 'config' keys {cfg} differ from the expected {expected}"
    E083 = "{where}: 'initialized' must be true or false"
    E084 = "{where}: 'lexicon_entries' must map lexicon names to lists of strings"
    E085 = "{where}: 'label_counts' must map words to {{label: positive count}}"
    E086 = "{where}: 'atoms' must be a list of strings"
    E087 = "{where}: 'atoms' contains duplicate names"
    E088 = "{where}: 'column_offsets' and 'column_atoms' differ in length ({n_offs} vs {n_cols})"
    E089 = '{where}: an uninitialized state cannot carry atoms or columns'
    E090 = 'window_features: training doc {q} ({text!r}) has {n_doc} tokens but {n_doc_labels} labels'
    E091 = ("window_features: 'attrs' names {attr!r} but no Token extension {attr_2!r} is registered "
            '(Token.set_extension)')
    E092 = 'WindowFeaturizer: all docs of one call must share the same Vocab'
    E093 = 'WindowFeaturizer: doc {q} ({text!r}) has {n_doc} tokens but {n_labels} own labels'
    E094 = "window_features: 'label_dictionary' needs the gold labels of the training docs (initialize(docs, labels))"
    E095 = '{where}: missing key {key!r}'
    E096 = '{where}: {key!r} must be a list of integers'
    E097 = "{where}: bad 'config': {err}"
    E098 = '{where}: atom {name!r} belongs to no test family of this configuration'
    E099 = '{where}: column {i} has offset {off} outside the window {window}'
    E100 = '{where}: column {i} names atom {atom}, but there are {n_atoms} atoms'
    E101 = '{where}: column {i} is a padding column at offset 0'
    E102 = '{where}: columns must be ordered by offset, then atom id (column {i})'
    # the treecrf component (pipe.py)
    E103 = 'The loss is computed inside update() by forward-backward.'
    E104 = "The model data's setting 'decode' must be one of {decoders}, got {cfg!r}."
    E105 = "Cannot add label {label!r} to '{name}' after training started."
    E106 = "The model data is for target {found!r}, but component '{name}' has target {target!r}."
    E107 = "The model data's labels {labels!r} are not strings: it was not saved by a treecrf component."
    E108 = 'The model data has missing={missing!r} but its trees have {n_surrogates} surrogate slots.'
    E109 = "No model file at {path}: was component '{name}' saved?"
    E110 = "The model data's setting {key!r} should be {type_name}, got {cfg!r}."
    E111 = 'The model data has invalid settings: {err}'
    E112 = "The model data's imputation table names a column out of range."
    E113 = '{err} (file: {path})'
    # readers and column files (readers.py)
    E114 = "{setting}: cannot set token attribute {attr!r}; use one of {settable_attrs} or '_.<extension>'"
    E115 = '{path}: file not found'
    E116 = 'NETtalk split must be one of {nettalk_splits}, not {split!r}'
    E117 = "read_nettalk: label must be 'stress' or 'phonemes', not {label!r}"
    E118 = "read_protein: split_at must be 'segment' or 'protein', not {split_at!r}"
    E119 = ('{setting}: column {ref!r} is given by name, but no column names were given (pass columns=[...] or use '
            'integer positions)')
    E120 = '{setting}: unknown column {ref!r}; the columns are {names}'
    E121 = 'label scheme {label_scheme!r} needs a label_column'
    E122 = '{where}: the column settings need {value} columns, but the line has only {n_rows}'
    E123 = 'read_columns: duplicate column names in {columns}'
    E124 = 'read_columns: label column {label_column!r} is not one of {columns}'
    E125 = 'unknown label scheme {label_scheme!r}; use one of {label_schemes}'
    E126 = '{setting}: column index {ref} is out of range for columns {names}'
    E127 = 'label_scheme must be one of {label_schemes}, not {label_scheme!r}'
    E128 = 'sequence {q}: {n_tokens} tokens but {n_labels} labels'
    E129 = 'ColumnCorpus: format must be one of {value}, not {format!r}'
    E130 = 'ColumnCorpus: target must be one of {targets}, not {target!r}'
    E131 = 'ColumnCorpus: limit must be an integer >= 0, not {limit!r}'
    E132 = "ColumnCorpus: 'path' is not set"
    E133 = '{path}, line {lineno}: expected {n_columns} columns, found {n_fields}: {line}'
    E134 = '{path}, line {lineno}: expected 4 tab-separated fields, found {n_fields}: {line}'
    E135 = '{split_path}, line {lineno}: word {word} has no aligned entry in nettalk.data'
    E136 = "{path}, line {lineno}: expected '<residue> <h|e|_>', found {line}"
    E137 = '{where}: invalid BIO label {tag} (expected O, B-X or I-X)'
    E138 = "label scheme 'token_attr' needs token_attr"
    E139 = "label scheme / target 'token_attr' needs the token_attr setting"
    E140 = 'input columns: two columns are mapped to {attr!r}'
    E141 = 'input columns: {attr!r} already holds the gold labels'
    E142 = ("ColumnCorpus: format 'columns' needs the column names (columns, --columns word,pos,ner) and the target "
            "(target, --target ner); the words are the first column and the labels the last unless words_column / "
            "label_column say otherwise")
    E143 = "ColumnCorpus: format {format!r} has fixed columns {formats}; 'columns' is only for format 'columns'"
    E144 = 'ColumnCorpus: NETtalk split must be one of {nettalk_splits}, not {split!r}'
    E145 = "ColumnCorpus: 'split' only applies to format 'nettalk'"
    E146 = '{where}: {value} is not a Universal POS tag (pos_)'
    # the command line (cli.py)
    E148 = 'No treecrf component in {pipeline}'
    E177 = 'treecrf.explain: doc must be a spaCy Doc (e.g. nlp.make_doc(text)), got {kind}'
    E178 = ('treecrf.explain: labels must be a list of {n} labels, one per token, each one of the component\'s '
            'labels {known}; got {labels!r}')
    E179 = 'explain: no treecrf component named {name!r} in {pipeline} (it has {names})'
    E184 = "treecrf '{name}': explain_span explains ner and spans targets, not {target!r} (use explain(doc))"
    E185 = 'TreeCRF model bytes: invalid numeric columns: {problem}'
    E186 = "window_features: 'vectors' is true but the pipeline's vectors table is empty (load a pipeline with vectors)"
    E187 = ("window_features: numeric attribute {attr!r} of token {i} ({token!r}) in doc {doc!r} is {value!r}, not a "
            "number")
    E188 = ("window_features: doc {text!r} has a tensor of shape {shape} for {n} tokens, but the featurizer was "
            "initialized with tensors of width {width}")
    E189 = ("window_features: 'tensor' is true but no training doc has a doc.tensor: put a tok2vec before treecrf "
            "and list it in [training] annotating_components (frozen)")
    E190 = "window_features: the docs give {found} numeric values per token, but the model was trained with {sources}"
    E191 = "{where}: invalid numeric sources: {problem}"
    E192 = "window_features: 'numeric_attrs' must be a list of attribute names, not {attrs!r}"
    E193 = ("window_features: {attr!r} in 'numeric_attrs' is not 'len', a Token attribute or '_.<extension>' (or is "
            "listed twice)")
    # training on a Dask cluster (engine/cluster.py)
    E194 = ("a cluster fit needs dask.distributed: pip install 'spacy-treecrf[dask]' (or leave the 'scheduler' "
            "setting empty to train in this process)")
    E195 = ("missing values with the {strategy!r} strategy route positions through the trees, which a cluster fit "
            "does not do yet: use missing 'imputation', 'indicator' or 'learned_direction', or "
            "train in this process")
    E196 = ("the 'rank' loss's line search is not run on a cluster: use loss 'crf', 'hamming' or 'pseudo_likelihood', "
            "or train in this process")
    E197 = "the Dask scheduler at {scheduler} has no workers to hold the training set"
    E198 = "training on a cluster: the shard on worker {worker} failed in round {round}: {error}"
    E199 = ("training on a cluster: worker {worker} was lost in round {round}, with its shard of the training set; "
            "the {done} rounds completed before are kept: restart the fit (a continued fit goes on from them)")
    E206 = ("training on a cluster: the shards growing a tree lost touch: {what}: {error} (a worker was lost, or "
            "the workers cannot reach each other's addresses)")
    E207 = ("{where}: where a fit runs is no longer a setting kept with the model: give the Dask scheduler to the "
            "fit itself, {how}")
    E209 = ("{path}, line {lineno}: not {encoding} text ({reason} at byte {position} of the line); convert the file to "
            "{encoding} first")
    E211 = ("features: {attr!r} reads the Token extension {name!r}, which is not registered: register it "
            "(Token.set_extension({name!r}, default=None)) before the docs are read, or let the corpus reader that "
            "sets it register it")
    E212 = ("The {what} {text} cannot be saved in a model file (UTF-8 text): it holds a lone surrogate at character "
            "{position} (as a file decoded with errors='surrogateescape' gives); decode it properly first")
    E213 = ("X's sequence {q}, position {t} is of type {kind}: a position is a dict of features, a list of feature "
            "names or one name (a string)")
    E214 = ("allowed_transitions must be None, 'bio' or an iterable of (previous label or None, label) pairs; got "
            "{what}")
    E215 = ("allowed_transitions='bio' needs BIO labels (O, B-X, I-X: upper-case B- and I- and a type), got {label!r} "
            "({type_name}); give the pairs allowed for another scheme (BIOES, lower case) as allowed_transitions")
    E223 = ("{where}: no labelling the transition constraints allow agrees with the labels known there and before "
            "it ({known}); give known labels that can follow one another (an I-X only after B-X or I-X, a sequence's "
            "first label one that may start it)")
    E224 = ("{where}: the known label {label!r} is not one of the model's labels {labels}; give a label it knows, or "
            "None where the label is unknown")
    E226 = "metrics: y_true and y_pred hold different numbers of labels or sequences ({n_true} and {n_pred})"
    E227 = "metrics: average must be one of {averages}, got {average!r}"
    E228 = ("metrics: average='binary' (the default, as in scikit-learn) scores two labels, but the sequences hold "
            "{n} ({labels}...); give average='micro', 'macro', 'weighted' or None")
    E229 = "metrics: pos_label={pos_label!r} is not one of the labels {labels}; give pos_label one of them"
    E230 = ("Column reader: documents={documents!r} is not possible with {format}: it must be true or false, and "
            "true only for column files (conll2000, conll2003, columns), whose -DOCSTART- lines separate documents")
    E231 = ("A stacked model (stack_window > 0) is fitted once, on one training set: its first stage's labels of the "
            "training data come from fold models of that data. Continued training (warm_start, resume_from) and a "
            "training corpus that changes between rounds are not possible with it; fit a new model, or use "
            "stack_window = 0")
    E232 = ("stack_window > 0 fits its first stage on two folds of the training sequences, but there are {n}; give "
            "at least two sequences (Docs), or use stack_window = 0")
    E233 = ("Component '{name}': stack_window > 0 fits its first stage once, on the whole training corpus, but "
            "round_every = 'batch' fits each round on one batch; use round_every = 'corpus', or stack_window = 0")
    E234 = "TreeCRF: 'small_trees' must be one of {choices}, got {value!r}"
    E235 = "brown_clusters: '{name}' must be {want}, got {value!r}"
    E236 = ("clusters file {path}, line {line}: expected BITS<tab>WORD (bits of 0s and 1s, as Brown clustering's "
            "output writes them), got {text!r}")
    E237 = "window_features: '{name}' must be the path of a file (a string; \"\" for none), got {value!r}"
    E238 = ("window_features: set 'clusters' (a clusters file) or 'cluster_text' (a text to learn them from at "
            "initialize), not both")
    E239 = "{where}: 'cluster_entries' must map words to bit strings of 0s and 1s"
    E240 = "{what} not found: {path}"
    E241 = "{path} is not UTF-8 text: {err}"
    E216 = ("{name}.explain_span: the span must be a labelled Span of at least one token (an entity or chunk of the "
            "doc), got {span}")
    E217 = ("Model trees: a leaf value of {value:g} lies outside +/-{bound:g}, the most a boosting round can move a "
            "potential: the file is damaged")
    E218 = ("X's sequence {q}, position {t} is a list of feature names holding a {kind}: a dict of features is a "
            "position of its own (a sequence is a list of positions), not a name")
    E219 = ("Component '{name}': none of the {n} training examples holds gold annotation of its target {target!r}, so "
            "there is nothing to learn (the loss would be 0 and the model would give every token one label): check "
            "that the corpus reader sets it")
    E220 = ("scheduler {address!r}: {scheme}:// cannot reach a Dask scheduler in another process; give its address "
            "as tcp://HOST:PORT (transports: {schemes})")
    E221 = ("scheduler {address!r}: no Dask scheduler answered within {seconds} s ({type_name}: {err}); check the "
            "address and that `dask scheduler` runs there")
    E222 = ("{where}: {n_labels:,} labels over {n_positions:,} positions need at least {need:.1f} GiB to train (a row per "
            "previous label at every position), and {have:.1f} GiB are available: fewer labels (are they tags, not "
            "free text?) or less data at once")
    E208 = ("evaluate: {path}, read with --format {format}, holds no gold annotation of {targets}, so every score "
            "would be 0: point --format (or --columns and --label-column) at the column that holds the labels")
    E200 = ("treecrf: 'rounds_per_pass' must be an integer from 1 to {maximum} (boosting rounds fitted on each pass's "
            "gradient), got {value!r}")

"""sklearn-crfsuite's tutorial (its word2features, fit, predict, predict_marginals, flat_f1_score,
flat_classification_report, the transition and state features), on CoNLL-2000 chunking, written for
sklearn-crfsuite. To run it on TreeCRF, change only the two imports:

    import spacy_treecrf as sklearn_crfsuite
    from spacy_treecrf import metrics

    python examples/crfsuite_tutorial.py DATA/conll2000 [--train N] [--test N]
"""
import argparse
from collections import Counter
from pathlib import Path

import sklearn_crfsuite
from sklearn_crfsuite import metrics


def read_conll2000(path, limit):
    sents, sent = [], []
    for line in open(path, encoding="utf8"):
        if line.strip():
            sent.append(tuple(line.split()))
        elif sent:
            sents.append(sent)
            sent = []
    if sent:
        sents.append(sent)
    return sents[:limit] if limit else sents


def word2features(sent, i):
    word = sent[i][0]
    postag = sent[i][1]

    features = {
        'bias': 1.0,
        'word.lower()': word.lower(),
        'word[-3:]': word[-3:],
        'word[-2:]': word[-2:],
        'word.isupper()': word.isupper(),
        'word.istitle()': word.istitle(),
        'word.isdigit()': word.isdigit(),
        'postag': postag,
        'postag[:2]': postag[:2],
    }
    if i > 0:
        word1 = sent[i-1][0]
        postag1 = sent[i-1][1]
        features.update({
            '-1:word.lower()': word1.lower(),
            '-1:word.istitle()': word1.istitle(),
            '-1:word.isupper()': word1.isupper(),
            '-1:postag': postag1,
            '-1:postag[:2]': postag1[:2],
        })
    else:
        features['BOS'] = True

    if i < len(sent)-1:
        word1 = sent[i+1][0]
        postag1 = sent[i+1][1]
        features.update({
            '+1:word.lower()': word1.lower(),
            '+1:word.istitle()': word1.istitle(),
            '+1:word.isupper()': word1.isupper(),
            '+1:postag': postag1,
            '+1:postag[:2]': postag1[:2],
        })
    else:
        features['EOS'] = True

    return features


def sent2features(sent):
    return [word2features(sent, i) for i in range(len(sent))]


def sent2labels(sent):
    return [label for token, postag, label in sent]


def print_transitions(trans_features):
    for (label_from, label_to), weight in trans_features:
        print("%-6s -> %-7s %0.6f" % (label_from, label_to, weight))


def print_state_features(state_features):
    for (attr, label), weight in state_features:
        print("%0.6f %-8s %s" % (weight, label, attr))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data", type=Path, help="the folder of CoNLL-2000's train.txt and test.txt")
    parser.add_argument("--train", type=int, default=0, help="the first N training sentences (0: all)")
    parser.add_argument("--test", type=int, default=0, help="the first N test sentences (0: all)")
    args = parser.parse_args()
    train_sents = read_conll2000(args.data / "train.txt", args.train)
    test_sents = read_conll2000(args.data / "test.txt", args.test)

    X_train = [sent2features(s) for s in train_sents]
    y_train = [sent2labels(s) for s in train_sents]
    X_test = [sent2features(s) for s in test_sents]
    y_test = [sent2labels(s) for s in test_sents]

    crf = sklearn_crfsuite.CRF(
        algorithm='lbfgs',
        c1=0.1,
        c2=0.1,
        max_iterations=100,
        all_possible_transitions=True
    )
    crf.fit(X_train, y_train)

    labels = list(crf.classes_)
    labels.remove('O')
    y_pred = crf.predict(X_test)
    print("weighted F1: %0.4f" % metrics.flat_f1_score(y_test, y_pred, average='weighted', labels=labels))
    sorted_labels = sorted(labels, key=lambda name: (name[1:], name[0]))
    print(metrics.flat_classification_report(y_test, y_pred, labels=sorted_labels, digits=3))
    print("sequence accuracy: %0.4f" % metrics.sequence_accuracy_score(y_test, y_pred))

    marginals = crf.predict_marginals(X_test[:1])
    first = crf.predict_marginals_single(X_test[0])
    print("P(%s) at the first token: %0.4f" % (y_pred[0][0], first[0][y_pred[0][0]]))
    assert marginals[0][0] == first[0]
    assert list(crf.predict_single(X_test[0])) == list(y_pred[0])

    print("Top likely transitions:")
    print_transitions(Counter(crf.transition_features_).most_common(5))
    print("Top positive:")
    print_state_features(Counter(crf.state_features_).most_common(5))
    print("Top negative:")
    print_state_features(Counter(crf.state_features_).most_common()[-5:])
    print("rounds/iterations: %d" % len(crf.training_log_.iterations))


if __name__ == "__main__":
    main()

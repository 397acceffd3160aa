#!/usr/bin/env node
// llama_cpp_check.mjs: an exported GGUF file (bin/export --to gguf) run by
// llama.cpp itself, through node-llama-cpp (npm), whose prebuilt llama.cpp
// for Linux x86-64 needs no compiler. It prints one JSON object that
// tests/test_export.c compares with our own programs:
//
//   node scripts/llama_cpp_check.mjs --model model.gguf --prompt 'ROMEO:' -n 58 \
//       [--window-file FILE] [--node-modules DIR]      (or --prompt-file FILE)
//
//   llama_cpp        llama.cpp's release, as node-llama-cpp reports it
//   architecture     general.architecture as llama.cpp read it
//   vocabulary_type  the tokenizer llama.cpp chose ("rwkv")
//   bos, eos         its BOS and EOS tokens (null: none)
//   prepends_bos     whether it adds a BOS to a prompt
//   prompt_tokens    llama.cpp's tokens of the prompt (no BOS, no EOS added)
//   prompt_text      those tokens detokenized
//   greedy_tokens    the greedy continuation of -n tokens (temperature 0)
//   greedy_text      that continuation detokenized
//   window_tokens    the window file's text tokenized (when given)
//   window_text      those tokens detokenized
//   logits           the window teacher-forced: at every position, the raw
//                    logits of every token id, in id order
//
// The context runs on the CPU (no GPU), with its KV cache in F32 and
// without flash attention, so that llama.cpp's own arithmetic is what is
// compared, not a cache's rounding. node-llama-cpp is found in
// --node-modules (default: build-node/node_modules beside scripts/, where
// .ci/run installs it); nothing is downloaded or built.
import {readFileSync} from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

function parseArgs(argv) {
    const args = {n: 0, nodeModules: path.join(path.dirname(fileURLToPath(import.meta.url)), "..",
                                              "build-node", "node_modules")};
    for (let i = 0; i < argv.length; i++) {
        const flag = argv[i], value = argv[i + 1];
        if (value === undefined) throw new Error(`${flag}: a value is needed`);
        if (flag === "--model") args.model = value;
        else if (flag === "--prompt") args.prompt = value;
        else if (flag === "--prompt-file") args.prompt = readFileSync(value, "utf8");
        else if (flag === "-n") args.n = Number(value);
        else if (flag === "--window-file") args.windowFile = value;
        else if (flag === "--node-modules") args.nodeModules = value;
        else throw new Error(`unknown flag ${flag}`);
        i++;
    }
    if (!args.model || args.prompt === undefined)
        throw new Error("usage: llama_cpp_check.mjs --model FILE --prompt TEXT|--prompt-file FILE -n N [--window-file FILE]");
    return args;
}

async function main() {
    const args = parseArgs(process.argv.slice(2));
    const entry = path.join(args.nodeModules, "node-llama-cpp", "dist", "index.js");
    const {getLlama, LlamaLogLevel} = await import(pathToFileURL(entry).href);
    // the prebuilt binary as installed: never build, never download
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
    const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
    // one slot more than the model's context: node-llama-cpp shifts a context
    // out (drops its first tokens) before the token that would fill it, and
    // a window of the model's whole context must be seen whole. No position
    // past the model's last is ever used: at most `context` tokens are given.
    const context = await model.createContext({
        contextSize: model.trainContextSize + 1, batchSize: model.trainContextSize + 1, sequences: 1,
        flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
        // one thread: llama.cpp's threads spin between the tiny steps, and on
        // a busy machine a step then waits seconds for a core
        threads: 1,
    });
    const result = {
        llama_cpp: llama.llamaCppRelease.release, architecture: model.fileInfo.metadata.general.architecture,
        vocabulary_type: model.vocabularyType, bos: model.tokens.bos, eos: model.tokens.eos,
        prepends_bos: model.tokens.shouldPrependBosToken,
    };

    const promptTokens = model.tokenize(args.prompt, false);
    result.prompt_tokens = promptTokens.map(Number);
    result.prompt_text = model.detokenize(promptTokens);

    // greedy: temperature 0 takes the most likely token at every step
    let sequence = context.getSequence();
    const greedy = [];
    if (args.n > 0)
        for await (const token of sequence.evaluate(promptTokens, {temperature: 0, yieldEogToken: true})) {
            greedy.push(token);
            if (greedy.length >= args.n) break;
        }
    result.greedy_tokens = greedy.map(Number);
    result.greedy_text = model.detokenize(greedy);
    sequence.dispose();

    if (args.windowFile) {
        const text = readFileSync(args.windowFile, "utf8");
        const tokens = model.tokenize(text, false);
        result.window_tokens = tokens.map(Number);
        result.window_text = model.detokenize(tokens);
        sequence = context.getSequence();
        const outputs = await sequence.controlledEvaluate(
            tokens.map((token) => [token, {generateNext: {logits: true}}]));
        result.logits = outputs.map((output) => {
            const row = [];
            for (const [token, logit] of output.next.logits) row[Number(token)] = logit;
            return row;
        });
        sequence.dispose();
    }
    process.stdout.write(JSON.stringify(result) + "\n");
    await context.dispose();
    await model.dispose();
    await llama.dispose();
}

main().catch((error) => {
    process.stderr.write(`llama_cpp_check: ${String(error && error.message || error).split("\n")[0]}\n`);
    process.exit(1);
});

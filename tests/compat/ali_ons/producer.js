'use strict';
// Sends messages with ali-ons' Producer and prints one JSON line per SendResult.
//
//   node producer.js --namesrv HOST:PORT --group GROUP [--linger-ms MS] < messages.jsonl
//
// Each input line: {"topic", "tags", "keys": [..], "body", "delayLevel"?, "properties"?}.
// Output lines: {"index", "msgId", "topic", "brokerName", "queueId", "queueOffset", "sendStatus"};
// a failed send prints {"index", "error"} and the script exits 1 at the end. With --linger-ms the
// producer stays connected (heartbeating) that long after printing {"event": "sent"}, so operator
// views can see it.

const readline = require('readline');
const { Producer, Message } = require('ali-ons');
const { parseArgs, clientOptions, emit } = require('./common');

async function readMessages() {
  const specs = [];
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim()) {
      specs.push(JSON.parse(line));
    }
  }
  return specs;
}

function buildMessage(spec) {
  const msg = new Message(spec.topic, spec.tags || null, Buffer.from(spec.body, 'utf8'));
  if (spec.keys && spec.keys.length) {
    msg.keys = spec.keys;
  }
  if (spec.delayLevel) {
    msg.delayTimeLevel = spec.delayLevel;
  }
  for (const [name, value] of Object.entries(spec.properties || {})) {
    msg.properties[name] = String(value);
  }
  return msg;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const specs = await readMessages();
  const producer = new Producer({ ...clientOptions(args), producerGroup: args.group || 'compat_producer' });
  producer.on('error', err => console.error('[producer error]', err.message));
  await producer.ready();
  let failed = 0;
  for (const [index, spec] of specs.entries()) {
    try {
      const result = await producer.send(buildMessage(spec));
      emit({
        index,
        msgId: result.msgId,
        topic: result.messageQueue.topic,
        brokerName: result.messageQueue.brokerName,
        queueId: Number(result.messageQueue.queueId),
        queueOffset: result.queueOffset,
        sendStatus: result.sendStatus,
      });
    } catch (err) {
      failed++;
      emit({ index, error: `${err.name}: ${err.message}` });
    }
  }
  if (args['linger-ms']) {
    emit({ event: 'sent' });
    await new Promise(resolve => setTimeout(resolve, Number(args['linger-ms'])));
  }
  await producer.close();
  process.exit(failed ? 1 : 0);
}

main().catch(err => {
  console.error(err);
  process.exit(2);
});
